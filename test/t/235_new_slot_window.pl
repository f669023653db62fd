# 235_new_slot_window.pl: between the worker's definition of a workload in
# its slot (loader.c apply_config: define_rows, then the rules, the
# undefinitions, the trees) and the grants' copy of it (publish_grants:
# bulkhead_grants_claim, bulkhead_grants_define), a statement of the new
# (or renamed) workload already runs in it, but its level in grants.c is
# still the slot's old one: not limited (memory.c bulkhead_memory_start
# returns before any grant: bulkhead_grants_limited is false), or, with
# another limit set, counted under the old generation, which the claim
# then drops.  Either way the statement's grant is never counted at the
# workload: a cursor opened in that window is invisible to max_memory for
# as long as it stays open, and the workload's later statements are
# granted its whole max_memory on top of it.
#
# gdb holds the worker at its first bulkhead_grants_claim for the new
# workload (the window), a session opens a cursor in it, then the worker
# goes on.  Skipped without gdb.
#
# Correct behaviour asserted: the cursor's 2 MB are counted at the
# workload once the load is done, and a second 2 MB statement waits
# (max_memory 3 MB).
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

plan skip_all => 'gdb is not installed' if gdb_path() eq '';

my $node = bulkhead_node('new_slot_window', memory_request => 'limit',
	conf => "work_mem = '1MB'\nmax_parallel_workers_per_gather = 0\n");
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
	VALUES ('other', 8, 8, '60s');});
wait_loaded($node, 'other', 8);

my $sorted = 'SELECT count(*) FROM (SELECT g FROM generate_series(1, 10) g ORDER BY g DESC) s';
my $in_nw = "SET bulkhead.exempt_superuser = off; SET bulkhead.workload = 'nw';";
my $worker = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'bulkhead'");
ok($worker =~ /^\d+$/, 'the bulkhead worker runs');

my $g = gdb_break($node, $worker, 'bulkhead_grants_claim if name[0] == 110 && name[1] == 119 && name[2] == 0', 'the worker');

$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,
	                               max_memory, memory_timeout)
	VALUES ('nw', 8, 8, '60s', '3MB', '60s');});
if (!gdb_hit($g, 'the worker stopped in its load of nw, before the grants\' copy'))
{
	done_testing();
	exit;
}
is($node->safe_psql('postgres', "SELECT max_memory FROM bulkhead_stats WHERE workload = 'nw'"),
	'3MB', 'nw is defined already (its sessions run in it)');

# in the window: a cursor of nw
my $h = session($node);
sql($h, $in_nw);
is(sql($h, "BEGIN; DECLARE c CURSOR FOR $sorted; FETCH 1 FROM c;"), '10', 'a cursor of nw is open');

gdb_go($g);
ok(poll_until($node, "SELECT count(*) > 0 FROM bulkhead_memory_stats() WHERE workload = 'nw' AND max_memory = '3MB'"),
	'the worker finished its load');

is($node->safe_psql('postgres', "SELECT memory_granted FROM bulkhead_stats WHERE workload = 'nw'"),
	'2097152', 'the cursor opened during the load is counted at nw');

my ($w, $wpid) = verbose_session($node);
sql($w, $in_nw);
send_async($w, "BEGIN; DECLARE c CURSOR FOR $sorted;");
ok(poll_until($node, "SELECT state = 'waiting for memory' FROM bulkhead_activity WHERE pid = $wpid"),
	'a second 2 MB statement of nw waits (3 MB: 2 MB held)');
sql($h, 'ROLLBACK');
finish_async($w);
sql($w, 'ROLLBACK');
close_session($_) for ($h, $w);

done_testing();
