# 500_priority_permits.pl: a queued lock holder is served first (1.5,
# issue 48), for the waits for a permit.
#
# 1. The inversion of issue 48: lane 'costly' (one permit) is held by a long
#    report; a transaction updates account 1 in lane 'all', then runs a
#    costly statement and waits in 'costly''s queue.  A plain UPDATE of the
#    same account from another session waits for its row lock.  The waiter
#    is a lock holder someone waits for: at its deadlock check it is granted
#    over the limit (costly running 2 of 1) while the report still runs, so
#    the UPDATE finishes while the report still holds its permit; the
#    borrowed permit goes back at COMMIT, and the waiter that queued in
#    'costly' before it is not handed a permit while the report holds.
# 2. The same in a tree of budgets (the budget full, its levels' counts
#    consistent) and 3. in a keyed workload (the key's count).
# 4. A boosted holder cancelled, and one terminated: its borrowed permit is
#    returned (running back), and one cancelled while it is only ahead (its
#    deadlock check not run yet) leaves the queue as it was.
# 5. Two lock holders of one workload: one is lent a permit, the other is
#    ahead and is lent one only once the first gave its back.
# At the end no permit is held or awaited anywhere, and every workload's
# figures pair up (acquired + moved_in = released + moved_out + running).
# What is asserted is order and state, never how long something took.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = bulkhead_node('priority_permits', conf => "deadlock_timeout = '500ms'\n");
lane_functions($node);

$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
	VALUES ('all', 10, 10, '60s'), ('costly', 1, 10, '60s'),
	       ('pool', 1, 10, '60s'), ('keyed', 1, 10, '60s');
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, parent)
	VALUES ('p_report', 1, 10, '60s', 'pool'), ('p_oltp', 1, 10, '60s', 'pool');
	CREATE ROLE app LOGIN;
	GRANT pg_read_all_stats TO app;
	INSERT INTO bulkhead_rule (position, role, workload) VALUES (1, 'app', 'all');
	INSERT INTO bulkhead_rule (position, role, workload, min_cost) VALUES (2, 'app', 'costly', 100000);
	CREATE TABLE acct (id int PRIMARY KEY, v int NOT NULL);
	INSERT INTO acct SELECT g, 0 FROM generate_series(1, 4) g;
	GRANT SELECT, UPDATE ON acct TO app;
});
wait_loaded($node, 'keyed', 1);
ok( poll_until(
		$node, "SELECT count(*) = 2 FROM bulkhead_stats WHERE parent = 'pool'"),
	'the budget pool and its children are loaded');
ok( poll_until(
		$node, q{
		SET bulkhead.exempt_superuser = off; SET ROLE app;
		SELECT (SELECT workload FROM bulkhead_classify('SELECT costly()')) = 'costly'}),
	'the statement rules of app are loaded');

# "running/queued" of workload $w
sub rq
{
	my ($w) = @_;
	return $node->safe_psql('postgres',
		"SELECT running || '/' || queued FROM bulkhead_stats WHERE workload = '$w'");
}

# pid's rows of bulkhead_activity, as workload/state
sub rows_of
{
	my ($pid) = @_;
	return $node->safe_psql(
		'postgres', qq{
		SELECT coalesce(string_agg(workload || '/' || state, ',' ORDER BY workload), '')
		  FROM bulkhead_activity WHERE pid = $pid});
}

sub wait_state
{
	my ($pid, $w, $state, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	ok( poll_until(
			$node, qq{
			SELECT count(*) = 1 FROM bulkhead_activity
			 WHERE pid = $pid AND workload = '$w' AND state = '$state'}),
		$what);
}

# Wait until pid waits for a heavyweight lock
sub wait_lock
{
	my ($pid, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	ok( poll_until(
			$node, "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $pid"),
		$what);
}

# Wait until pid's statement is over (idle, or idle in transaction)
sub wait_idle
{
	my ($pid, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	ok( poll_until(
			$node, "SELECT state LIKE 'idle%' FROM pg_stat_activity WHERE pid = $pid"),
		$what);
}

sub pid_of
{
	my ($s) = @_;
	return sql($s, 'SELECT pg_backend_pid()');
}

my $report = session($node);
my $rpid = pid_of($report);
my $other = session($node);
my $opid = pid_of($other);
my $updater = session($node);
my $upid = pid_of($updater);

# --- 1. the inversion of issue 48, with lanes ---------------------------------
is(sql($report, "SELECT bulkhead_acquire('costly')"), '', 'lanes: the report holds costly');
send_async($other, "SELECT bulkhead_acquire('costly');");
wait_state($opid, 'costly', 'queued', 'lanes: another caller queues for costly first');

my $mover = session($node, 'postgres', 'app');
my $mpid = pid_of($mover);
is(sql($mover, 'BEGIN; UPDATE acct SET v = v + 1 WHERE id = 1; SELECT held();'),
	'all/auto', 'lanes: the transaction updated account 1 in lane all');
send_async($mover, 'SELECT costly(), held();');
wait_state($mpid, 'costly', 'queued', 'lanes: its costly statement waits in costly');
send_async($updater, 'UPDATE acct SET v = v + 10 WHERE id = 1;');
wait_lock($upid, 'lanes: the plain UPDATE waits for the row lock');

wait_state($mpid, 'costly', 'running', 'lanes: the lock holder is granted costly');
is(rq('costly'), '2/1', 'lanes: over the limit by one, the earlier waiter still queued');
is(rows_of($rpid), 'costly/running', 'lanes: while the report still holds its permit');
my ($out, $err) = finish_async($mover);
is("$out$err", "1|costly/auto from all", 'lanes: the costly statement ran in costly');
is(sql($mover, 'COMMIT'), '', 'lanes: the transaction commits');
wait_idle($upid, 'lanes: the plain UPDATE finished');
is(rows_of($rpid), 'costly/running', 'lanes: ... while the report still runs');
is(rq('costly'), '1/1', 'lanes: the borrowed permit is back, nothing handed on over the limit');
($out, $err) = finish_async($updater);
is($err, '', 'lanes: the UPDATE succeeded');
is(sql($report, "SELECT bulkhead_release('costly')"), '', 'lanes: the report ends');
wait_state($opid, 'costly', 'running', 'lanes: the earlier waiter is served');
($out, $err) = finish_async($other);
is($err, '', 'lanes: its acquire returned');
is(sql($other, "SELECT bulkhead_release('costly')"), '', 'lanes: and it releases');
is($node->safe_psql('postgres', 'SELECT v FROM acct WHERE id = 1'), '11',
	'lanes: both updates were applied');

# --- 2. budgets ------------------------------------------------------------------
# pool (1 permit) is full with p_report's holder; another caller waits in
# p_oltp, then the lock holder
is(sql($report, "SELECT bulkhead_acquire('p_report')"), '', 'budgets: the report holds pool\'s permit');
send_async($other, "SELECT bulkhead_acquire('p_oltp');");
wait_state($opid, 'p_oltp', 'queued', 'budgets: another caller waits in p_oltp');
my $holder = session($node);
my $hpid = pid_of($holder);
is(sql($holder, 'BEGIN; UPDATE acct SET v = v + 1 WHERE id = 2;'), '',
	'budgets: a transaction updates account 2');
send_async($holder, "SELECT bulkhead_acquire_xact('p_oltp');");
wait_state($hpid, 'p_oltp', 'queued', 'budgets: it waits in p_oltp');
send_async($updater, 'UPDATE acct SET v = v + 10 WHERE id = 2;');
wait_lock($upid, 'budgets: the plain UPDATE waits for the row lock');
wait_state($hpid, 'p_oltp', 'running', 'budgets: the lock holder is granted');
is(rq('pool') . ' ' . rq('p_oltp') . ' ' . rq('p_report'), '2/0 1/1 1/0',
	'budgets: over the budget\'s limit by one, at every level (a budget counts its own queue)');
($out, $err) = finish_async($holder);
is(sql($holder, 'COMMIT'), '', 'budgets: the transaction commits');
wait_idle($upid, 'budgets: the plain UPDATE finished');
is(rq('pool') . ' ' . rq('p_oltp') . ' ' . rq('p_report'), '1/0 0/1 1/0',
	'budgets: the borrowed permit is back at every level, nothing handed on');
is(sql($report, "SELECT bulkhead_release('p_report')"), '', 'budgets: the report ends');
wait_state($opid, 'p_oltp', 'running', 'budgets: the earlier waiter is served');
finish_async($other);
finish_async($updater);
is(sql($other, "SELECT bulkhead_release('p_oltp')"), '', 'budgets: and it releases');
is(rq('pool') . ' ' . rq('p_oltp') . ' ' . rq('p_report'), '0/0 0/0 0/0',
	'budgets: nothing held or queued');

# --- 3. keys ---------------------------------------------------------------------
is(sql($report, "SELECT bulkhead_acquire('keyed', key => 'tenant-a')"), '',
	'keys: the report holds keyed\'s permit as tenant-a');
send_async($other, "SELECT bulkhead_acquire('keyed', key => 'tenant-b');");
wait_state($opid, 'keyed', 'queued', 'keys: a caller of tenant-b waits');
is(sql($holder, 'BEGIN; UPDATE acct SET v = v + 1 WHERE id = 3;'), '',
	'keys: a transaction updates account 3');
send_async($holder, "SELECT bulkhead_acquire_xact('keyed', key => 'tenant-b');");
wait_state($hpid, 'keyed', 'queued', 'keys: it waits as tenant-b, behind the other');
send_async($updater, 'UPDATE acct SET v = v + 10 WHERE id = 3;');
wait_lock($upid, 'keys: the plain UPDATE waits for the row lock');
wait_state($hpid, 'keyed', 'running', 'keys: the lock holder is granted');
my $keys = q{SELECT string_agg(key || ':' || running || '/' || queued, ' ' ORDER BY key)
	FROM bulkhead_keys WHERE workload = 'keyed'};
is(rq('keyed') . ' ' . $node->safe_psql('postgres', $keys), '2/1 tenant-a:1/0 tenant-b:1/1',
	'keys: over the limit by one, counted in its key');
finish_async($holder);
is(sql($holder, 'COMMIT'), '', 'keys: the transaction commits');
wait_idle($upid, 'keys: the plain UPDATE finished');
is(rq('keyed') . ' ' . $node->safe_psql('postgres', $keys), '1/1 tenant-a:1/0 tenant-b:0/1',
	'keys: the borrowed permit is back, its key\'s count too, nothing handed on');
is(sql($report, "SELECT bulkhead_release('keyed')"), '', 'keys: the report ends');
wait_state($opid, 'keyed', 'running', 'keys: the earlier waiter is served');
finish_async($other);
finish_async($updater);
is(sql($other, "SELECT bulkhead_release('keyed')"), '', 'keys: and it releases');

# --- 4. a boosted holder cancelled, terminated ----------------------------------
is(sql($report, "SELECT bulkhead_acquire('costly')"), '', 'faults: the report holds costly');

# Account $id updated by $s's transaction, which then waits for costly
# (then sleeps in its statement once granted); the updater waits for it.
sub boosted
{
	my ($s, $pid, $id, $sleep, $name) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	is(sql($s, "BEGIN; UPDATE acct SET v = v + 1 WHERE id = $id;"), '',
		"$name: a transaction updates account $id");
	send_async($s, "SELECT bulkhead_acquire_xact('costly'), pg_sleep($sleep);");
	wait_state($pid, 'costly', 'queued', "$name: it waits for costly");
	send_async($updater, "UPDATE acct SET v = v + 10 WHERE id = $id;");
	wait_lock($upid, "$name: the plain UPDATE waits for the row lock");
	return;
}

boosted($holder, $hpid, 4, 60, 'cancel');
wait_state($hpid, 'costly', 'running', 'cancel: the lock holder is granted');
is(rq('costly'), '2/0', 'cancel: over the limit by one');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($hpid)");
($out, $err) = finish_async($holder);
like($err, qr/canceling statement due to user request/, 'cancel: its statement is cancelled');
is(sql($holder, 'ROLLBACK'), '', 'cancel: its transaction rolls back');
wait_idle($upid, 'cancel: the plain UPDATE finished');
is(rows_of($hpid), '', 'cancel: it holds nothing');
is(rq('costly'), '1/0', 'cancel: the borrowed permit is returned');
finish_async($updater);

my $victim = session($node);
my $vpid = pid_of($victim);
boosted($victim, $vpid, 4, 60, 'terminate');
wait_state($vpid, 'costly', 'running', 'terminate: the lock holder is granted');
is(rq('costly'), '2/0', 'terminate: over the limit by one');
$node->safe_psql('postgres', "SELECT pg_terminate_backend($vpid)");
ok(poll_until($node, "SELECT NOT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $vpid)"),
	'terminate: the holder is gone');
close_session($victim);
wait_idle($upid, 'terminate: the plain UPDATE finished');
is(rows_of($vpid), '', 'terminate: it holds nothing');
is(rq('costly'), '1/0', 'terminate: the borrowed permit is returned');
finish_async($updater);

# ahead only (its deadlock check after 10 s, so no loan before; it asks
# every second whether it is waited on): cancelled 2.5 s after the UPDATE
# began to wait for it, while it waits behind a caller that came first;
# that caller is then served first
send_async($other, "SELECT bulkhead_acquire('costly');");
wait_state($opid, 'costly', 'queued', 'ahead: another caller queues for costly first');
sql($holder, "SET deadlock_timeout = '10s'");
boosted($holder, $hpid, 4, 0, 'ahead');
$node->safe_psql('postgres', 'SELECT pg_sleep(2.5)');
is(rows_of($hpid), 'costly/queued', 'ahead: it still waits');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($hpid)");
($out, $err) = finish_async($holder);
like($err, qr/canceling statement due to user request/, 'ahead: its wait is cancelled');
is(sql($holder, 'ROLLBACK; RESET deadlock_timeout'), '', 'ahead: its transaction rolls back');
wait_idle($upid, 'ahead: the plain UPDATE finished');
is(rq('costly'), '1/1', 'ahead: the queue is as it was');
is(sql($report, "SELECT bulkhead_release('costly')"), '', 'ahead: the report ends');
wait_state($opid, 'costly', 'running', 'ahead: the caller that came first is served');
finish_async($other);
finish_async($updater);
is(sql($other, "SELECT bulkhead_release('costly')"), '', 'ahead: and it releases');

# --- 5. one loan per workload ---------------------------------------------------
# Two transactions, each holding a row another session waits for, queue for
# costly: one is lent a permit, the other stays ahead, not lent a second
# (a workload passes its limit by one at most), and is lent one once the
# first has given its back.
my $h2 = session($node);
my $h2pid = pid_of($h2);
my $u2 = session($node);
my $u2pid = pid_of($u2);
is(sql($report, "SELECT bulkhead_acquire('costly')"), '', 'one loan: the report holds costly');
boosted($holder, $hpid, 2, 0, 'one loan, first');
is(sql($h2, 'BEGIN; UPDATE acct SET v = v + 1 WHERE id = 3;'), '',
	'one loan, second: a transaction updates account 3');
send_async($h2, "SELECT bulkhead_acquire_xact('costly');");
wait_state($h2pid, 'costly', 'queued', 'one loan, second: it waits for costly');
send_async($u2, 'UPDATE acct SET v = v + 10 WHERE id = 3;');
wait_lock($u2pid, 'one loan, second: the plain UPDATE waits for its row lock');
my $two = qq{
	SELECT string_agg(state || ':' || boosted || ':' || borrowed, ',' ORDER BY state)
	  FROM bulkhead_activity WHERE pid IN ($hpid, $h2pid)};
ok( poll_until(
		$node, "SELECT ($two) = 'queued:true:false,running:true:true'"),
	'one loan: one holder is lent a permit, the other is ahead');
$node->safe_psql('postgres', 'SELECT pg_sleep(1.5)');	# three deadlock checks
is($node->safe_psql('postgres', $two), 'queued:true:false,running:true:true',
	'one loan: the other is still not lent one');
is(rq('costly'), '2/1', 'one loan: costly over its limit by one only');
my $first_running = $node->safe_psql('postgres',
	"SELECT pid FROM bulkhead_activity WHERE pid IN ($hpid, $h2pid) AND state = 'running'");
my ($lent, $ahead, $ahead_pid) = $first_running == $hpid ? ($holder, $h2, $h2pid) : ($h2, $holder, $hpid);
finish_async($lent);
is(sql($lent, 'COMMIT'), '', 'one loan: the lent one commits');
wait_state($ahead_pid, 'costly', 'running', 'one loan: then the other is lent one');
is(rq('costly'), '2/0', 'one loan: over the limit by one again');
finish_async($ahead);
is(sql($ahead, 'COMMIT'), '', 'one loan: the other commits');
finish_async($_) for ($updater, $u2);
is(rq('costly'), '1/0', 'one loan: both loans returned');
is(sql($report, "SELECT bulkhead_release('costly')"), '', 'one loan: the report ends');

# --- every permit returned --------------------------------------------------------
is( $node->safe_psql(
		'postgres', q{
		SELECT count(*) FROM bulkhead_activity}),
	'0', 'no permit held or awaited');
is( $node->safe_psql(
		'postgres', q{
		SELECT string_agg(workload || ' ' || running || '/' || queued, ',' ORDER BY workload)
		  FROM bulkhead_stats WHERE running <> 0 OR queued <> 0}),
	'', 'every workload at rest: 0 running, 0 queued');
lanes_paired($node, 'at the end', 'all', 'costly', 'pool', 'p_report', 'p_oltp', 'keyed');
is($node->safe_psql('postgres', 'SELECT string_agg(v::text, \',\' ORDER BY id) FROM acct'),
	'11,22,22,30', 'every update was applied');

close_session($_) for ($report, $other, $updater, $mover, $holder, $h2, $u2);
$node->stop;
done_testing();
