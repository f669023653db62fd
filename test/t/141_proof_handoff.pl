# Waiters that sleep on a workload's proof (deadlockfree.c) must still see a cycle
# that closes through one of them within about deadlock_timeout, when the
# workload's holders change under them.  Four waiters queue for the only
# permit, held by h, which waits for a row lock of x (x waits for nothing):
# no deadlock, the searches of one waiter (the prover) renew the workload's
# proof every 3 s (30 x 100 ms) and the others sleep on it for as long.
# Then h's permit passes to the head waiter g, which starts to wait for the
# row of a sleeping waiter s: a cycle s -> g -> s.
#   1. the prover stays a waiter (g is queued ahead of it, and checks only
#      after a long deadlock_timeout): its search finds its own wait stuck, but
#      the proof in the slot was made for h, not g; the sleepers must still
#      be woken.
#   2. the prover is cancelled first: the head waiter g, woken to check in
#      its place, is granted the permit; the checks must pass on again.
# Both again with max_bypass set (issue 25): h's permit then goes to the
# newest waiter g, not to the head, with the prover waiting on (or granted:
# then the head is made the prover) and with the prover cancelled first;
# the others are then granted newest first.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = bulkhead_node('proof_handoff');
$node->safe_psql('postgres', q{
	ALTER SYSTEM SET deadlock_timeout = '100ms';
	ALTER SYSTEM SET log_min_messages = debug1;
	SELECT pg_reload_conf();
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
	VALUES ('w', 1, 50, '120s');
	CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL);
	INSERT INTO t SELECT g, 0 FROM generate_series(1, 40) g;
});
wait_loaded($node, 'w', 1);
ok(poll_until($node, "SELECT current_setting('deadlock_timeout') = '100ms'"),
	'deadlock_timeout is 100ms');

sub dl_session { return verbose_session($node); }

# the pids of the waiters' searches logged after byte $offset, in order
sub searchers
{
	my ($offset, $waiters) = @_;
	my %is_waiter = map { $_->[1] => 1 } @$waiters;
	my $log = slurp_file($node->logfile, $offset);
	return grep { $is_waiter{$_} }
	  map { /\[(\d+)\].*bulkhead deadlock check: / ? $1 : () }
	  split /\n/, $log;
}

sub late_cycle
{
	my ($case, $cancel_prover, $bypass) = @_;
	my ($x, $px) = dl_session();
	my ($h, $ph) = dl_session();
	sql($x, 'BEGIN; UPDATE t SET v = v + 1 WHERE id = 1;');
	sql($h, "BEGIN; SELECT bulkhead_acquire_xact('w');");
	send_async($h, 'UPDATE t SET v = v + 1 WHERE id = 1;');
	ok(poll_until($node, "SELECT pg_blocking_pids($ph) = ARRAY[$px]"),
		"$case: the holder waits for a row lock of a session that waits for nothing");
	my $offset = -s $node->logfile;
	my @waiters;

	# case 1: the head waiter never checks (its deadlock_timeout is long),
	# so that the prover is the next one and stays a waiter
	if (!$cancel_prover && !$bypass)
	{
		my ($s, $pid) = dl_session();
		sql($s, "SET deadlock_timeout = '60s'; BEGIN; UPDATE t SET v = v + 1 WHERE id = 10;");
		send_async($s, "SELECT bulkhead_acquire_xact('w');");
		push @waiters, [ $s, $pid, 10 ];
		ok( poll_until(
				$node,
				"SELECT count(*) = 1 FROM bulkhead_activity WHERE pid = $pid AND state = 'queued'"),
			"$case: the head waiter is queued");
	}
	for my $i (1 .. 4)
	{
		my ($s, $pid) = dl_session();
		my $row = 10 + $i;
		sql($s, "BEGIN; UPDATE t SET v = v + 1 WHERE id = $row;");
		send_async($s, "SELECT bulkhead_acquire_xact('w');");
		push @waiters, [ $s, $pid, $row ];
		ok( poll_until(
				$node,
				"SELECT count(*) = 1 FROM bulkhead_activity WHERE pid = $pid AND state = 'queued'"),
			"$case: waiter $i is queued");
	}

	# the proof's interval grows to 3 s (0.1, 0.2, ... 1.6, 3 s); then wait
	# for a renewal, and for the sleepers to go back to sleep on it
	usleep(7_000_000);
	my $n = scalar(searchers($offset, \@waiters));
	my $deadline = time() + 10;
	usleep(50_000) while scalar(searchers($offset, \@waiters)) == $n && time() < $deadline;
	my @s = searchers($offset, \@waiters);
	cmp_ok(scalar(@s), '>', $n, "$case: the proof is renewed");
	my $prover = $s[-1];
	usleep(400_000);

	# h gets its row: it can move (test A), so nobody searches and renews
	# the proof while the permits change hands below
	sql($x, 'ROLLBACK');
	my ($out, $err) = finish_async($h);
	is($err, '', "$case: the holder's UPDATE goes on");

	if ($cancel_prover)
	{
		my ($ps) = map { $_->[0] } grep { $_->[1] == $prover } @waiters;
		$node->safe_psql('postgres', "SELECT pg_cancel_backend($prover)");
		my (undef, $perr) = finish_async($ps);
		like($perr, qr/57014/, "$case: the prover is cancelled");
		sql($ps, 'ROLLBACK');
		close_session($ps);
		@waiters = grep { $_->[1] != $prover } @waiters;
	}

	# h gives its permit to the head waiter g (with max_bypass: the newest)
	sql($h, 'ROLLBACK');
	my $g = $bypass ? pop @waiters : shift @waiters;
	($out, $err) = finish_async($g->[0]);
	is($err, '', "$case: the next waiter is granted the permit");

	# g waits for the row of s: a sleeping waiter other than the prover
	# and than the next waiter to be served
	my ($s) = grep { $_->[1] != $prover }
	  ($bypass ? @waiters[0 .. $#waiters - 1] : @waiters[1 .. $#waiters]);
	my $t0 = time();
	send_async($g->[0], "UPDATE t SET v = v + 1 WHERE id = $s->[2];");
	($out, $err) = finish_async($s->[0]);
	my $dt = time() - $t0;
	like($err, qr/ERROR:  40P01: deadlock detected/,
		"$case: the cycle through a sleeping waiter is found");
	cmp_ok($dt, '<', 1.5, sprintf('%s: found %.3f s after it closed', $case, $dt));
	sql($s->[0], 'ROLLBACK');
	@waiters = grep { $_ != $s } @waiters;
	($out, $err) = finish_async($g->[0]);
	is($err, '', "$case: the granted waiter's UPDATE goes on");
	sql($g->[0], 'ROLLBACK');
	for my $ws ($bypass ? reverse @waiters : @waiters)
	{
		($out, $err) = finish_async($ws->[0]);
		is($err, '', "$case: waiter $ws->[1] gets its permit in turn");
		sql($ws->[0], 'ROLLBACK');
	}
	close_session($_->[0]) foreach (@waiters, $g, $s);
	close_session($_) foreach ($x, $h);
}

late_cycle('prover waits on', 0, 0);
late_cycle('prover cancelled', 1, 0);

# max_bypass set; max_queued changes with it, so that the load shows
$node->safe_psql('postgres',
	"UPDATE bulkhead_workload SET max_bypass = '1h', max_queued = 51 WHERE name = 'w'");
ok( poll_until(
		$node,
		"SELECT count(*) = 1 FROM bulkhead_stats WHERE workload = 'w' AND max_queued = 51"),
	'max_bypass set');
late_cycle('max_bypass, prover waits on', 0, 1);
late_cycle('max_bypass, prover cancelled', 1, 1);

is($node->safe_psql('postgres',
		q{SELECT running || '/' || queued || ' dl ' || deadlocks FROM bulkhead_stats WHERE workload = 'w'}),
	'0/0 dl 4', 'nothing running or queued, four deadlocks counted');

$node->stop;
done_testing();
