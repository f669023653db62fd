# 228_memory_grant_race.pl: a defect found by the 1.4 review in
# grants.c:bulkhead_grants_acquire.  It FAILED on the code it was written
# against; the fix decides on a local flag set under the lock (waits), and
# the breakpoint is now on the wait path's first statement after the lock
# (the same window: the wait may be served before it reads its state).
#
# grant_served_between_unlock_and_check_leaks: a statement that must wait
# is queued under the lock (state MEM_WAITING, its path copied to
# me->wait, the caller's grant->bytes left 0); the lock is released; then
# "if (me->state != MEM_WAITING)" is read again without the lock.  If a
# release serves it in between (state MEM_GRANTED, the levels and
# me->held charged), the backend takes the at-once path: it returns with
# grant->bytes = 0 and my_wait still true.  Its release then returns 0
# bytes: the level stays charged.  Only a later abort or the exit of that
# backend, through bulkhead_grants_wait_cleanup, gives it back; once the
# backend has waited again (my_wait reset), never: memory_granted stays
# above 0 at rest until a restart, and the workload runs short.
#
# The window is a few instructions wide.  pgbench (24 clients, 2 CPUs, a
# workload of 4MB, 2MB statements, no error at all) hit it once in 836,000
# waits: 2MB granted at rest for good, a row in bulkhead_memory_activity
# for a pid long gone.  Here gdb holds the waiting backend in the window
# (a breakpoint on that check), while the holder's release serves it.
# Skipped without gdb.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

plan skip_all => 'gdb is not installed' if gdb_path() eq '';

# the line of the check after the lock (the state read unlocked then, the
# local flag now), after the queueing in bulkhead_grants_acquire
my $src = slurp_file("$FindBin::RealBin/../../src/memory/grants.c");
my @lines = split /\n/, $src;
my ($in_acquire, $released, $line) = (0, 0, undef);
for my $i (0 .. $#lines)
{
	$in_acquire = 1 if $lines[$i] =~ /^bulkhead_grants_acquire\(/;
	next unless $in_acquire;
	$released = 1 if $lines[$i] =~ /LWLockRelease\(bulkhead_grants_shared->lock\)/;
	if ($released && $lines[$i] =~ /if \(me->state != MEM_WAITING\)|count_workload\(slotno, name, true, /)
	{
		$line = $i + 1;
		last;
	}
}
plan skip_all => 'the unlocked check is not in bulkhead_grants_acquire any more'
  unless defined $line;

my $node = bulkhead_node('memory_grant_race', memory_request => 'limit',
	conf => "work_mem = '1MB'\nmax_parallel_workers_per_gather = 0\n");
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,
	                               max_memory, memory_timeout)
	VALUES ('rg', 8, 8, '60s', '2MB', '2s');});
wait_loaded($node, 'rg', 8);

my $sorted = 'SELECT count(*) FROM (SELECT g FROM generate_series(1, 10) g ORDER BY g DESC) s';
my $in_rg = "SET bulkhead.exempt_superuser = off; SET bulkhead.workload = 'rg';";

sub granted
{
	return $node->safe_psql('postgres',
		"SELECT memory_granted FROM bulkhead_stats WHERE workload = 'rg'");
}

my $h = session($node);
sql($h, $in_rg);
sql($h, "BEGIN; DECLARE c CURSOR FOR $sorted;");
is(granted(), '2097152', 'the holder\'s cursor has the 2MB of rg');

my ($w, $wpid) = verbose_session($node);
sql($w, $in_rg);

# gdb stops the waiter at the check, until gdb_go
my $g = gdb_break($node, $wpid, "grants.c:$line", 'the waiter');

send_async($w, "$sorted;");
if (!gdb_hit($g, 'the waiter queued, released the lock and stopped before its check'))
{
	done_testing();
	exit;
}

# the holder returns its grant: that serves the waiter, in the window
sql($h, 'CLOSE c; COMMIT');
gdb_go($g);
my ($out, $err) = finish_async($w);
is("$out$err", '10', 'the waiter\'s statement ran');

is(granted(), '0',
	'grant_served_between_unlock_and_check_leaks: nothing granted at rest (the waiter is idle)');

# the waiter waits once more (2s, then shrunk): the leak is for good
($out, $err) = sql2($w, $sorted);
close_session($w);
ok(poll_until($node, "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $wpid"),
	'the waiter is gone');
is(granted(), '0',
	'grant_served_between_unlock_and_check_leaks: nothing granted once the waiter is gone');
is($node->safe_psql('postgres', "SELECT count(*) FROM bulkhead_memory_activity() WHERE pid = $wpid"),
	'0', 'grant_served_between_unlock_and_check_leaks: no memory row for a pid long gone');
close_session($h);

done_testing();
