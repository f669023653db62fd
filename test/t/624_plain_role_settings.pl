# 624_plain_role_settings.pl (review of issue 47, 1.5): what a plain role's
# settings can do to the grants of its memory nodes, besides a set_config()
# inside a node's call (621).
#  - bulkhead.memory_request is not the plain role's to set (SET,
#    set_config, a connection's options);
#  - a cursor's FETCH after SET work_mem = 256MB, hash_mem_multiplier = 1000
#    runs its under-estimated sort, hash join and hashed Agg within their
#    grants (they spill);
#  - debug_parallel_query = on (a single-copy Gather: the worker runs the
#    whole plan at the Gather's grant) spills as well;
#  - nothing granted or waiting at rest.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use BoundTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = bound_node('plain_role_settings',
	conf => "bulkhead.max_memory = '16MB'\nmax_parallel_workers_per_gather = 0\n"
	  . "autovacuum = off\njit = off\nlog_temp_files = 0\n");

my $s = session($node, 'postgres', 'plain');

# 1. bulkhead.memory_request
my ($out, $err) = sql2($s, "SET bulkhead.memory_request = 'limit'");
like($err, qr/permission denied/, 'a plain role may not SET bulkhead.memory_request');
($out, $err) = sql2($s, "SELECT set_config('bulkhead.memory_request', 'limit', false)");
like($err, qr/permission denied/, 'nor set_config() it');
is(sql($s, 'SHOW bulkhead.memory_request'), 'use', 'it stays use');
my ($ret, $o2, $e2) = $node->psql('postgres', 'SHOW bulkhead.memory_request',
	extra_params => [ '-U', 'plain' ],
	connstr => $node->connstr('postgres') . " options='-c bulkhead.memory_request=limit'");
ok($o2 eq 'use' || $e2 =~ /permission denied/, 'nor set it in a connection\'s options') or diag("$o2 $e2");

# 2. a cursor FETCHed after raising the settings: its nodes stay within
# their grants (temporary files written)
sub temp_files_of
{
	my ($sql) = @_;
	my $from = -s $node->logfile;
	my ($o, $e) = sql2($s, $sql);
	die $e if $e ne '';
	my $log = slurp_file($node->logfile, $from);
	my @files = $log =~ /temporary file/g;
	return scalar(@files);
}

sql($s, "SET work_mem = '64kB'; SET hash_mem_multiplier = 1;");
sql($s, 'BEGIN; DECLARE c CURSOR FOR SELECT * FROM stale WHERE a > 100 ORDER BY b;');
sql($s, "SET work_mem = '256MB'; SET hash_mem_multiplier = 1000;");
my $n = temp_files_of('FETCH ALL FROM c; CLOSE c; COMMIT;');
cmp_ok($n, '>', 0, "a cursor's sort FETCHed after SET work_mem = 256MB spills ($n files)");

sql($s, "SET work_mem = '64kB'; SET hash_mem_multiplier = 1;");
sql($s, 'BEGIN; DECLARE c CURSOR FOR SELECT count(*) FROM big JOIN (SELECT * FROM stale WHERE a > 100) t ON t.a = big.a;');
sql($s, "SET work_mem = '256MB'; SET hash_mem_multiplier = 1000;");
$n = temp_files_of('FETCH ALL FROM c; CLOSE c; COMMIT;');
cmp_ok($n, '>', 0, "a cursor's hash join FETCHed after SET hash_mem_multiplier = 1000 spills ($n files)");

sql($s, "SET work_mem = '64kB'; SET hash_mem_multiplier = 1; SET enable_sort = off;");
sql($s, 'BEGIN; DECLARE c CURSOR FOR SELECT b, count(*) FROM stale WHERE a > 100 GROUP BY b;');
sql($s, "SET work_mem = '256MB'; SET hash_mem_multiplier = 1000;");
$n = temp_files_of('FETCH ALL FROM c; CLOSE c; COMMIT;');
cmp_ok($n, '>', 0, "a cursor's hashed Agg FETCHed after SET hash_mem_multiplier = 1000 spills ($n files)");
sql($s, 'RESET enable_sort;');

# 3. debug_parallel_query (force_parallel_mode before 16): a single-copy
# Gather over an under-estimated sort
my $force = $node->safe_psql('postgres', 'SHOW server_version_num') >= 160000 ?
  'debug_parallel_query' : 'force_parallel_mode';
sql($s, "SET work_mem = '256MB'; SET hash_mem_multiplier = 1000; SET $force = on;"
	  . 'SET max_parallel_workers_per_gather = 2;');
my $plan = sql($s, 'EXPLAIN (ANALYZE, VERBOSE, COSTS OFF, TIMING OFF) SELECT * FROM stale WHERE a > 100 ORDER BY b');
like($plan, qr/Gather.*Single Copy: true.*Worker 0:.*Sort Method: external/s,
	'the worker\'s sort under a single-copy Gather spills within the Gather\'s grant') or diag($plan);
sql($s, "RESET $force;");

is($node->safe_psql('postgres', "SELECT memory_granted FROM bulkhead_stats WHERE workload = 'w'"),
	'0', 'nothing granted at rest');
is($node->safe_psql('postgres', "SELECT count(*) FROM bulkhead_activity WHERE state <> 'running'"),
	'0', 'no waiter at rest');
close_session($s);
done_testing();
