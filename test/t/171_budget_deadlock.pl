# 171_budget_deadlock.pl: deadlock detection through a shared budget
# (issue 21).  A waiter of leaf a that is blocked only because its sibling
# b borrows the budget's shared part waits for b's holders: when b's
# holder waits for a row lock the waiter holds, the cycle is found and the
# waiter fails with 40P01 within a few deadlock_timeouts;
# bulkhead_blocking_pids names b's holder.  When b's holder is merely busy
# and then gives its permit back, nothing is reported: the waiter gets the
# permit.
#
# Budget root: max_running 2; children a and b (reserved 0) and r
# (reserved 1, idle): the shared part is 2 - 1 = 1.  b's holder borrows
# it, so a's waiter is blocked though one of root's permits is free (r's,
# never lent).

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use BulkheadTest;

my $bound = 2.0;    # seconds from closing the cycle to the error (10 deadlock_timeouts)

my $node = bulkhead_node('budget_deadlock');
$node->safe_psql(
	'postgres', q{
	ALTER SYSTEM SET deadlock_timeout = '200ms';
	SELECT pg_reload_conf();
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
	VALUES ('root', 2, 0, '20s');
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, parent, reserved)
	VALUES ('a', 2, 4, '20s', 'root', 0), ('b', 2, 4, '20s', 'root', 0),
	       ('r', 1, 4, '20s', 'root', 1);
	CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL);
	INSERT INTO t VALUES (1, 0);
	});
ok( poll_until(
		$node,
		"SELECT count(*) = 3 FROM bulkhead_stats WHERE parent = 'root'"),
	'the budget and its three children are loaded');
ok(poll_until($node, "SELECT current_setting('deadlock_timeout') = '200ms'"),
	'deadlock_timeout is 200ms');

sub queued
{
	my ($pid) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	ok( poll_until(
			$node,
			"SELECT count(*) = 1 FROM bulkhead_activity a JOIN pg_stat_activity s USING (pid)"
			  . " WHERE pid = $pid AND a.state = 'queued' AND s.wait_event_type = 'Extension'"
		),
		"process $pid is queued");
}

sub counts
{
	return $node->safe_psql(
		'postgres', q{
		SELECT string_agg(workload || ':' || running || '/' || queued || ' dl ' || deadlocks,
		                  ', ' ORDER BY workload)
		FROM bulkhead_stats WHERE workload IN ('root', 'a', 'b', 'r')});
}

# --- 1. the cycle: a's waiter holds the row, b's holder waits for it ---------
{
	my ($w, $pw) = verbose_session($node);
	my ($h, $ph) = verbose_session($node);
	is(sql($h, "SELECT bulkhead_acquire('b')"), '', "b's holder borrows the shared permit");
	sql($w, 'BEGIN; UPDATE t SET v = v + 1 WHERE id = 1;');
	send_async($w, "SELECT bulkhead_acquire_xact('a');");
	queued($pw);
	is(counts(), 'a:0/1 dl 0, b:1/0 dl 0, r:0/0 dl 0, root:1/0 dl 0',
		"a's waiter queues though one of root's two permits is free (r's reservation)");
	is($node->safe_psql('postgres', "SELECT bulkhead_blocking_pids($pw)"),
		"{$ph}", "bulkhead_blocking_pids of a's waiter names b's holder");

	my $t0 = time();
	send_async($h, 'UPDATE t SET v = v + 10 WHERE id = 1;');
	my ($out, $err) = finish_async($w);
	my $dt = time() - $t0;
	like($err, qr/ERROR:  40P01: deadlock detected/, "a's waiter fails with 40P01");
	like($err, qr/Process $pw waits for a permit of workload "a"; blocked by process $ph\./,
		"the detail says a's waiter waits for b's holder");
	cmp_ok($dt, '<', $bound,
		sprintf('the cycle is broken %.3f s after it closed', $dt));
	sql($w, 'ROLLBACK');
	($out, $err) = finish_async($h);
	is($err, '', "b's holder's UPDATE goes on once the waiter's transaction ends");
	is(sql($h, "SELECT bulkhead_release('b')"), '', "b's holder gives its permit back");
	is(counts(), 'a:0/0 dl 1, b:0/0 dl 0, r:0/0 dl 0, root:0/0 dl 0',
		'one deadlock counted (in a), nothing held or queued');
	close_session($_) for ($w, $h);
}

# --- 2. no cycle: b's holder is busy for a while, then gives its permit back -
{
	my ($w, $pw) = verbose_session($node);
	my ($h, $ph) = verbose_session($node);
	is(sql($h, "SELECT bulkhead_acquire('b')"), '', "b's holder borrows the shared permit");
	sql($w, 'BEGIN; UPDATE t SET v = v + 1 WHERE id = 1;');
	send_async($w, "SELECT bulkhead_acquire_xact('a'); SELECT 'granted';");
	queued($pw);
	# busy for 1.5 s (7 deadlock_timeouts, each one a check), then done
	send_async($h, "SELECT pg_sleep(1.5); SELECT bulkhead_release('b');");
	my ($out, $err) = finish_async($w);
	is($err, '', "a's waiter is not reported as deadlocked");
	like($out, qr/granted/, "a's waiter gets the permit once b's holder gives it back");
	($out, $err) = finish_async($h);
	is($err, '', "b's holder ran without error");
	sql($w, 'COMMIT');
	is(counts(), 'a:0/0 dl 1, b:0/0 dl 0, r:0/0 dl 0, root:0/0 dl 0',
		'no deadlock counted this time, nothing held or queued');
	close_session($_) for ($w, $h);
}

$node->stop;
done_testing();
