# 005_worker_restart.pl: the bulkhead worker, ended with
# pg_terminate_backend, is started again by the postmaster.  Permits held
# and waits under way are untouched by its absence and by its return, a
# release while it is down still hands the permit on, and a configuration
# change made after the restart reaches shared memory.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);
use BulkheadTest;

my $node = bulkhead_node('worker_restart');
$node->safe_psql(
	'postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
	VALUES ('k', 2, 3, '120s');
	});
wait_loaded($node, 'k', 2);

my @h = map { session($node) } 1 .. 2;
my @q = map { session($node) } 1 .. 3;
my @hpid = map { sql($_, 'SELECT pg_backend_pid()') } @h;
my @qpid = map { sql($_, 'SELECT pg_backend_pid()') } @q;

sub counts
{
	my $st = stats($node, 'k');
	return "$st->{running}/$st->{queued}";
}

sql($_, "SELECT bulkhead_acquire('k')") for @h;
for my $i (0 .. 1)
{
	send_async($q[$i], "SELECT bulkhead_acquire('k');");
	ok( poll_until(
			$node,
			"SELECT count(*) = 1 FROM bulkhead_activity WHERE pid = $qpid[$i] AND state = 'queued'"
		),
		"waiter Q" . ($i + 1) . " queued");
}
my $before = activity_states($node, 'k');
is($before,
	"$hpid[0]:running,$hpid[1]:running,$qpid[0]:queued,$qpid[1]:queued",
	'two session permits held, two waiters queued');

my $old = worker_pid($node);
like($old, qr/^\d+$/, 'one bulkhead worker runs');
my $t0 = time();
is($node->safe_psql('postgres', "SELECT pg_terminate_backend($old)"),
	't', 'worker terminated');
ok( poll_until(
		$node,
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $old", 10),
	'the old worker is gone');
is(counts(), '2/2', 'while the worker is down: running 2, queued 2');

# A change committed while the worker is down is loaded when it is back.
$node->safe_psql('postgres',
	"UPDATE bulkhead_workload SET max_queued = 4 WHERE name = 'k'");

# A release while the worker is (most likely still) down hands the permit
# to the head waiter: the hand-off is the releasing backend's work.
my $down = worker_pid($node) eq '';
note 'worker ' . ($down ? 'still down' : 'already back') . ' at the release';
is(sql($h[0], "SELECT bulkhead_release('k')"), '', 'H1 releases');
ok( poll_until(
		$node,
		"SELECT count(*) = 1 FROM bulkhead_activity WHERE pid = $qpid[0] AND state = 'running'",
		3),
	'Q1 is served at once');
my ($out, $err) = finish_async($q[0]);
is($err, '', "Q1's acquire succeeded");
is(counts(), '2/1', 'running 2, queued 1');

ok( poll_until(
		$node, qq{
		SELECT count(*) = 1 FROM pg_stat_activity
		WHERE backend_type = 'bulkhead' AND pid <> $old}, 20),
	'the postmaster starts a new worker');
my $new = worker_pid($node);
note sprintf('new worker %s up %.1f s after the terminate', $new, time() - $t0);
isnt($new, $old, 'the new worker has a new pid');

ok( poll_until(
		$node, q{
		SELECT max_running = 2 AND max_queued = 4 FROM bulkhead_stats
		WHERE workload = 'k'}, 30),
	'the change made while the worker was down is loaded');
# Let the new worker check for ended backends a few times: it must neither
# reset nor free anything that is held or awaited.
sleep(2.5);
is(activity_states($node, 'k'),
	"$hpid[1]:running,$qpid[0]:running,$qpid[1]:queued",
	'after the restart: H2 and Q1 hold permits, Q2 still queued');
is(counts(), '2/1', 'after the restart: running 2, queued 1');

# The permit held since before the restart can be released, and the
# waiter that was queued across the restart is served.
is(sql($h[1], "SELECT bulkhead_release('k')"), '',
	'H2 releases its permit taken before the restart');
ok( poll_until(
		$node,
		"SELECT count(*) = 1 FROM bulkhead_activity WHERE pid = $qpid[1] AND state = 'running'",
		3),
	'Q2, queued across the restart, is served');
($out, $err) = finish_async($q[1]);
is($err, '', "Q2's acquire succeeded");

# A configuration change after the restart reaches the new worker: raising
# max_running serves a waiter at once.
send_async($q[2], "SELECT bulkhead_acquire('k');");
ok( poll_until(
		$node,
		"SELECT count(*) = 1 FROM bulkhead_activity WHERE pid = $qpid[2] AND state = 'queued'"
	),
	'Q3 queued behind Q1 and Q2');
$node->safe_psql('postgres',
	"UPDATE bulkhead_workload SET max_running = 3 WHERE name = 'k'");
ok( poll_until(
		$node,
		"SELECT count(*) = 1 FROM bulkhead_stats WHERE workload = 'k' AND max_running = 3",
		3),
	'UPDATE max_running after the restart reaches bulkhead_stats within 3 s');
ok( poll_until(
		$node,
		"SELECT count(*) = 1 FROM bulkhead_activity WHERE pid = $qpid[2] AND state = 'running'",
		3),
	'the raised limit serves Q3 at once');
($out, $err) = finish_async($q[2]);
is($err, '', "Q3's acquire succeeded");
is(counts(), '3/0', 'running 3, queued 0');

is(sql($_, 'SELECT bulkhead_release_all()'), '1', 'a holder releases') for @q;
is(counts(), '0/0', 'running 0, queued 0 at the end');
my $st = stats($node, 'k');
is($st->{acquired}, $st->{released}, 'acquired = released');
is("$st->{cancelled}/$st->{timed_out}", '0/0', 'nothing cancelled or timed out');
ok(!$node->log_contains('left by ended processes'),
	'the worker freed no permit of a live backend');

close_session($_) for (@h, @q);
$node->stop;
done_testing();
