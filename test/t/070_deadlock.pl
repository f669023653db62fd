# Deadlocks through permits, timed: with deadlock_timeout = 200ms and
# queue_timeout = 60s, each cycle of issue 11 is broken with 40P01 within
# 1.5 s of being closed, by failing exactly one member; bulkhead_stats
# counts it in deadlocks (not in cancelled, not in timed_out), and running
# and queued come back to the permits really held.  The cycles use every
# scope: session, transaction and automatic (bulkhead.workload) permits,
# try_ variants with a timeout, and waits inside a function, a procedure
# and a DO block.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $bound = 1.5;    # seconds from closing a cycle to the victim's error

my $node = bulkhead_node('deadlock');
$node->safe_psql('postgres', q{
	ALTER SYSTEM SET deadlock_timeout = '200ms';
	SELECT pg_reload_conf();
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
	VALUES ('w', 1, 10, '60s'), ('w1', 1, 10, '60s'), ('w2', 1, 10, '60s');
	CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL);
	INSERT INTO t VALUES (1, 0), (2, 0);
	CREATE ROLE gated;
	GRANT ALL ON t TO gated;
	CREATE FUNCTION acquire_in_function(w text) RETURNS boolean
	LANGUAGE plpgsql AS $$
	BEGIN
		RETURN bulkhead_try_acquire_xact(w, '30s');
	END $$;
	CREATE PROCEDURE acquire_in_procedure(w text)
	LANGUAGE plpgsql AS $$
	BEGIN
		PERFORM bulkhead_acquire(w);
	END $$;
});
wait_loaded($node, $_, 1) foreach qw(w w1 w2);
ok(poll_until($node, "SELECT current_setting('deadlock_timeout') = '200ms'"),
	'deadlock_timeout is 200ms');

# a session that shows SQLSTATEs in its errors
sub dl_session
{
	my $s = session($node);
	sql($s, '\set VERBOSITY verbose');
	my $pid = sql($s, 'SELECT pg_backend_pid()');
	return ($s, $pid);
}

sub queued
{
	my ($pid) = @_;
	ok( poll_until(
			$node,
			"SELECT count(*) = 1 FROM bulkhead_activity a JOIN pg_stat_activity s USING (pid)"
			  . " WHERE pid = $pid AND a.state = 'queued' AND s.wait_event_type = 'Extension'"),
		"process $pid is queued");
}

sub lock_waiting
{
	my ($pid) = @_;
	ok(poll_until($node, "SELECT cardinality(pg_blocking_pids($pid)) > 0"),
		"process $pid waits for a lock");
}

# Wait (bounded) until the deadlocks column sums to $n; returns the seconds
# since $t0
sub broken_after
{
	my ($n, $t0) = @_;
	poll_until($node, "SELECT sum(deadlocks) = $n FROM bulkhead_stats", 10);
	return time() - $t0;
}

sub counts
{
	return $node->safe_psql('postgres', q{
		SELECT string_agg(workload || ':' || running || '/' || queued || ' dl ' || deadlocks
		                  || ' cancelled ' || cancelled || ' timed_out ' || timed_out,
		                  ', ' ORDER BY workload)
		FROM bulkhead_stats});
}

my $cycles = 0;

# Close a cycle: send $sql in session $closer, then wait for the statement
# of session $victim to end with 40P01, within $bound seconds.  Returns the
# victim's stderr.
sub close_cycle
{
	my ($closer, $sql, $victim, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $t0 = time();
	send_async($closer, $sql);
	my ($out, $err) = finish_async($victim);
	my $dt = time() - $t0;
	$cycles++;
	like($err, qr/ERROR:  40P01: deadlock detected/, "$what: the waiter fails with 40P01");
	cmp_ok($dt, '<', $bound, sprintf('%s: broken %.3f s after the cycle closed', $what, $dt));
	return $err;
}

# The statement that session $s was running goes on, without error
sub goes_on
{
	my ($s, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my ($out, $err) = finish_async($s);
	is($err, '', $what);
}

# --- 1. lock <-> permit, closed by the holder's UPDATE ------------------------
{
	my ($a, $pa) = dl_session();
	my ($b, $pb) = dl_session();
	sql($a, "BEGIN; SELECT bulkhead_acquire_xact('w');");
	sql($b, 'BEGIN; UPDATE t SET v = v + 10 WHERE id = 1;');
	send_async($b, "SELECT bulkhead_acquire_xact('w');");
	queued($pb);
	is($node->safe_psql('postgres', "SELECT bulkhead_blocking_pids($pb)"),
		"{$pa}", 'bulkhead_blocking_pids names the holder');
	my $err = close_cycle($a, 'UPDATE t SET v = v + 1 WHERE id = 1;', $b,
		'lock-permit (holder closes)');
	like($err, qr/DETAIL:  Process $pb waits for a permit of workload "w"; blocked by process $pa\.\n\s*Process $pa waits for a lock; blocked by process $pb\./,
		'the detail names both processes and what they wait for');
	like($err, qr/HINT:  Acquire permits of several workloads in one fixed order/, 'with the hint');
	goes_on($a, "the holder's UPDATE goes on");
	is(counts(), 'w:1/0 dl 1 cancelled 0 timed_out 0, w1:0/0 dl 0 cancelled 0 timed_out 0, w2:0/0 dl 0 cancelled 0 timed_out 0',
		'running 1 (the holder), nothing queued, one deadlock counted');
	sql($a, 'COMMIT');
	sql($b, 'ROLLBACK');
	close_session($_) foreach ($a, $b);
}

# --- 2. lock <-> permit, closed by the waiter (session permit) ----------------
{
	my ($a, $pa) = dl_session();
	my ($b, $pb) = dl_session();
	sql($a, "BEGIN; SELECT bulkhead_acquire_xact('w');");
	sql($b, 'BEGIN; UPDATE t SET v = v + 10 WHERE id = 1;');
	send_async($a, 'UPDATE t SET v = v + 1 WHERE id = 1;');
	lock_waiting($pa);
	close_cycle($b, "SELECT bulkhead_acquire('w');", $b, 'lock-permit (waiter closes, session permit)');
	goes_on($a, "the holder's UPDATE goes on");
	sql($a, 'COMMIT');
	sql($b, 'ROLLBACK');
	ok(poll_until($node, "SELECT sum(deadlocks) = $cycles FROM bulkhead_stats"),
		'two deadlocks counted');
	close_session($_) foreach ($a, $b);
}

# --- 3. permit <-> permit across two workloads (transaction permits) ---------
{
	my ($a, $pa) = dl_session();
	my ($b, $pb) = dl_session();
	sql($a, "BEGIN; SELECT bulkhead_acquire_xact('w1');");
	sql($b, "BEGIN; SELECT bulkhead_acquire_xact('w2');");
	send_async($a, "SELECT bulkhead_acquire_xact('w2');");
	queued($pa);
	my $t0 = time();
	send_async($b, "SELECT bulkhead_acquire_xact('w1');");
	my $dt = broken_after($cycles + 1, $t0);
	$cycles++;
	cmp_ok($dt, '<', $bound, sprintf('permit-permit: broken %.3f s after the cycle closed', $dt));
	my ($aout, $aerr) = finish_async($a);
	my ($bout, $berr) = finish_async($b);
	my @failed = grep { /40P01: deadlock detected/ } ($aerr, $berr);
	is(scalar(@failed), 1, 'exactly one of the two fails with 40P01');
	is(scalar(grep { $_ eq '' } ($aerr, $berr)), 1, 'the other one gets its permit');
	is($node->safe_psql('postgres', "SELECT sum(running) || '/' || sum(queued) FROM bulkhead_stats WHERE workload IN ('w1', 'w2')"),
		'2/0', 'the survivor holds two permits, nothing queued');
	sql($a, 'COMMIT');
	sql($b, 'COMMIT');
	close_session($_) foreach ($a, $b);
}

# --- 4. three backends, two workloads, one row lock; every scope -------------
# a: automatic permit of w1 (bulkhead.workload, as role gated), then queues
#    for w2 in a DO block with a try_ variant and a timeout;
# b: session permit of w2 taken in a procedure, then waits for c's row lock;
# c: locks row 2, then queues for w1 in a function (try_ with a timeout).
{
	my ($a, $pa) = dl_session();
	my ($b, $pb) = dl_session();
	my ($c, $pc) = dl_session();
	sql($a, "SET bulkhead.workload = 'w1'; SET ROLE gated; BEGIN; SELECT 'work of a';");
	is($node->safe_psql('postgres', "SELECT scope FROM bulkhead_activity WHERE pid = $pa"),
		'auto', 'a holds an automatic permit of w1');
	sql($b, "CALL acquire_in_procedure('w2');");
	sql($c, 'BEGIN; UPDATE t SET v = v + 100 WHERE id = 2;');
	send_async($b, 'UPDATE t SET v = v + 10 WHERE id = 2;');
	lock_waiting($pb);
	send_async($c, "SELECT acquire_in_function('w1');");
	queued($pc);
	my $t0 = time();
	send_async($a, q{DO $$ BEGIN PERFORM bulkhead_try_acquire_xact('w2', '30s'); END $$;});
	my $dt = broken_after($cycles + 1, $t0);
	$cycles++;
	cmp_ok($dt, '<', $bound, sprintf('three backends: broken %.3f s after the cycle closed', $dt));
	my ($out, $err);
	if ($node->safe_psql('postgres', "SELECT deadlocks FROM bulkhead_stats WHERE workload = 'w1'") eq '0')
	{
		# a found it (its wait for w2 failed): its transaction ended, with
		# its permit of w1, so c is served, and then b once c commits
		($out, $err) = finish_async($a);
		like($err, qr/40P01: deadlock detected/, 'a (automatic permit, DO block) is the one victim');
		goes_on($c, 'c gets w1 in its function');
		sql($c, 'COMMIT');
		goes_on($b, "b's UPDATE goes on");
		sql($a, 'ROLLBACK');
	}
	else
	{
		# c found it (its wait for w1 failed): its row lock went with its
		# transaction, b's UPDATE goes on; a is served once b releases w2
		($out, $err) = finish_async($c);
		like($err, qr/40P01: deadlock detected/, 'c (waiting in a function) is the one victim');
		goes_on($b, "b's UPDATE goes on");
		sql($b, 'SELECT bulkhead_release_all()');
		goes_on($a, 'a gets w2 in its DO block');
		sql($a, 'COMMIT');
		sql($c, 'ROLLBACK');
	}
	sql($a, 'RESET ROLE; RESET bulkhead.workload;');
	sql($b, 'SELECT bulkhead_release_all()');
	close_session($_) foreach ($a, $b, $c);
}

# --- 5. transparent admission: a gated holder's LOCK TABLE -------------------
{
	my ($a, $pa) = dl_session();
	my ($b, $pb) = dl_session();
	$node->safe_psql('postgres', 'ALTER TABLE t OWNER TO gated');
	sql($a, "SET bulkhead.workload = 'w'; SET ROLE gated; BEGIN; SELECT 'work of a';");
	sql($b, "SET bulkhead.workload = 'w'; SET ROLE gated;");
	# (RESET ROLE after it: the next statement, over a permit that a's
	# transaction still holds, would queue again)
	send_async($b, "SELECT v FROM t WHERE id = 1;\nRESET ROLE;");
	queued($pb);
	close_cycle($a, 'LOCK TABLE t IN ACCESS EXCLUSIVE MODE;', $b,
		'transparent admission (LOCK TABLE)');
	goes_on($a, 'the LOCK TABLE goes through');
	sql($a, 'COMMIT; RESET ROLE; RESET bulkhead.workload;');
	close_session($_) foreach ($a, $b);
}

# --- the counters ---------------------------------------------------------------
is($node->safe_psql('postgres', 'SELECT sum(deadlocks) FROM bulkhead_stats'),
	$cycles, "deadlocks counts the $cycles cycles");
is($node->safe_psql('postgres',
		q{SELECT sum(running) || ' / ' || sum(queued) || ' / ' || sum(cancelled) || ' / ' || sum(timed_out) FROM bulkhead_stats}),
	'0 / 0 / 0 / 0', 'nothing running or queued; no wait counted as cancelled or timed out');
is($node->safe_psql('postgres', 'SELECT sum(acquired) = sum(released) FROM bulkhead_stats'),
	't', 'every permit acquired was released');

$node->stop;
done_testing();
