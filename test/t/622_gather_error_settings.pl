# 622_gather_error_settings.pl (review of issue 47, 1.5): parallel query
# under memory grants.
#
# - workers run within their Gather's grant: an under-estimated sort in the
#   workers spills (passes);
# - a Gather's first call sets work_mem and hash_mem_multiplier through the
#   GUC machinery at a nesting level of its own; when the Gather runs inside
#   a memory node's call (a Sort above it: enable_gathermerge = off), that
#   level's "prior" is the Sort's grant, written by the Sort's wrapper.  An
#   error inside the Gather's first call (every row divides by zero) leaves
#   the level to the abort: the xact callback puts back the session's values,
#   then AtEOXact_GUC pops the Gather's level and writes the Sort's grant and
#   hash_mem_multiplier 1 back.  The session keeps them (fails: "3MB 1",
#   the Sort's grant being all of work_mem here).
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use BoundTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = bound_node('gather_error_settings',
	conf => "bulkhead.max_memory = '32MB'\nautovacuum = off\njit = off\n"
	  . "max_worker_processes = 16\nmax_parallel_workers = 8\n", memory => '16MB', stale_rows => 200000);

my $parallel = "SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0;"
  . "SET min_parallel_table_scan_size = 0; SET max_parallel_workers_per_gather = 2;";
my $settings = "SELECT current_setting('work_mem') || ' ' || current_setting('hash_mem_multiplier');";

my $s = session($node, 'postgres', 'plain');
sql($s, $parallel . "SET work_mem = '3MB'; SET hash_mem_multiplier = 7;");

sub at_rest
{
	my ($what) = @_;
	is($node->safe_psql('postgres',
			"SELECT memory_granted FROM bulkhead_stats WHERE workload = 'w'"),
		'0', "nothing granted at rest after $what");
	is($node->safe_psql('postgres',
			"SELECT count(*) FROM bulkhead_activity WHERE state <> 'running'"),
		'0', "no waiter after $what");
}

# 1. workers run within the Gather's grant: an under-estimated sort in
# each worker spills
my $plan = sql($s, 'EXPLAIN (ANALYZE, VERBOSE, COSTS OFF, TIMING OFF) '
	  . 'SELECT * FROM stale WHERE a > 100 ORDER BY b');
like($plan, qr/Gather Merge.*Workers Launched: [12].*Sort/s, 'a sort in the workers')
  or diag($plan);
my @methods = $plan =~ /(Sort Method: [^\n]*)/g;
note(join("\n", @methods));
ok(@methods >= 2 && !grep({ !/external/ } @methods),
	'every participant\'s under-estimated sort spills within its grant') or diag($plan);
at_rest('a parallel sort');

# 2. a Sort above a Gather, an error in the Gather's first call
sql($s, 'SET enable_gathermerge = off;');
$plan = sql($s, 'EXPLAIN (COSTS OFF) SELECT b FROM big WHERE 1 / (a - a) > 0 ORDER BY b');
like($plan, qr/Sort.*Gather.*Parallel Seq Scan on big/s, 'a Sort above a Gather') or diag($plan);
my ($out, $err) = sql2($s, 'SELECT b FROM big WHERE 1 / (a - a) > 0 ORDER BY b');
like($err, qr/division by zero/, 'an error in the Gather\'s first call');
is(sql($s, $settings), '3MB 7',
	'after it, work_mem and hash_mem_multiplier are the session\'s (not the Sort\'s grant and 1)');
sql($s, "SET work_mem = '3MB'; SET hash_mem_multiplier = 7;");
at_rest('an error in a Gather under a Sort');

# the same in a savepoint
sql($s, 'BEGIN; SAVEPOINT a;');
($out, $err) = sql2($s, 'SELECT b FROM big WHERE 1 / (a - a) > 0 ORDER BY b');
like($err, qr/division by zero/, 'the error in a savepoint');
sql($s, 'ROLLBACK TO SAVEPOINT a;');
is(sql($s, $settings), '3MB 7', 'after ROLLBACK TO SAVEPOINT, the session\'s settings');
sql($s, 'COMMIT;');
sql($s, "SET work_mem = '3MB'; SET hash_mem_multiplier = 7;");
at_rest('an error in a Gather under a Sort, in a savepoint');

# 3. a Gather with no memory node above it: its level's prior is the
# session's (passes)
sql($s, 'RESET enable_gathermerge;');
($out, $err) = sql2($s, 'SELECT b FROM big WHERE 1 / (a - a) > 0 ORDER BY b');
like($err, qr/division by zero/, 'an error under a Gather Merge');
is(sql($s, $settings), '3MB 7', 'the session\'s settings after it');

close_session($s);
done_testing();
