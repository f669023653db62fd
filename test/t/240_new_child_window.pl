# 240_new_child_window.pl: review2 235's window is still open for a new
# workload that has no max_memory of its own but sits under a budget that
# has one.  define_rows now prepares the slot's level before the slot takes
# the workload (grantstate.c bulkhead_grants_prepare), but only its own
# limits: its parent stays -1 until publish_grants, so
# bulkhead_grants_mark_limits leaves the level's "limited" hint false.
# Between the first release of dir_lock (the child already linked under its
# budget for permits, its rules in force) and publish_grants, memory.c
# bulkhead_memory_start returns before any grant (bulkhead_grants_limited
# false): a cursor opened then holds work_mem that the budget never counts,
# for as long as it stays open, and the budget's other statements are
# granted its whole max_memory on top of it.  The commit's claim "a slot's
# limits are set before it takes its workload, so no statement runs before
# them" does not hold for a budget's limit.
#
# gdb holds the worker at bulkhead_grants_claim for the new child (in
# publish_grants: the window), a session opens a cursor in it, the worker
# goes on.  Skipped without gdb.
#
# Correct behaviour asserted: once the load is done the budget counts the
# cursor's 2 MB, and a sibling's 2 MB statement waits (budget: 3 MB).
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

plan skip_all => 'gdb is not installed' if gdb_path() eq '';

my $node = bulkhead_node('new_child_window', memory_request => 'limit',
	conf => "work_mem = '1MB'\nmax_parallel_workers_per_gather = 0\n");
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,
	                               max_memory, memory_timeout)
	VALUES ('b', 8, 8, '60s', '3MB', '60s');
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, parent)
	VALUES ('sib', 4, 4, '60s', 'b');});
wait_loaded($node, 'sib', 4);

my $sorted = 'SELECT count(*) FROM (SELECT g FROM generate_series(1, 10) g ORDER BY g DESC) s';
my $worker = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'bulkhead'");
ok($worker =~ /^\d+$/, 'the bulkhead worker runs');

my $g = gdb_break($node, $worker, 'bulkhead_grants_claim if name[0] == 110 && name[1] == 99 && name[2] == 0', 'the worker');

$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, parent)
	VALUES ('nc', 4, 4, '60s', 'b');});
if (!gdb_hit($g, 'the worker stopped in its load of nc, before the grants\' copy'))
{
	done_testing();
	exit;
}
is($node->safe_psql('postgres', "SELECT parent FROM bulkhead_stats WHERE workload = 'nc'"),
	'b', 'nc is defined under b already (its sessions run in it)');

# in the window: a cursor of nc
my ($h, $hpid) = verbose_session($node);
is(sql($h, "BEGIN; SELECT bulkhead_acquire_xact('nc');"), '', 'a session takes a permit of nc');
is(sql($h, "DECLARE c CURSOR FOR $sorted; FETCH 1 FROM c;"), '10', 'a cursor of nc is open');

gdb_go($g);
ok(poll_until($node, "SELECT count(*) > 0 FROM bulkhead_memory_stats() WHERE workload = 'nc'"),
	'the worker finished its load');
sleep 1;

is($node->safe_psql('postgres', "SELECT memory_granted FROM bulkhead_stats WHERE workload = 'b'"),
	'2097152', 'the budget counts the 2 MB of the cursor opened during the load');

my ($w, $wpid) = verbose_session($node);
is(sql($w, "BEGIN; SELECT bulkhead_acquire_xact('sib');"), '', 'a session takes a permit of sib');
send_async($w, "DECLARE s CURSOR FOR $sorted;");
ok(poll_until($node, "SELECT state = 'waiting for memory' FROM bulkhead_activity WHERE pid = $wpid"),
	'a sibling\'s 2 MB statement waits (budget 3 MB: 2 MB held)');
sql($h, 'ROLLBACK');
finish_async($w);
sql($w, 'ROLLBACK');
close_session($_) for ($h, $w);

done_testing();
