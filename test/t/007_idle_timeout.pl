# 007_idle_timeout.pl: a client that takes a permit and goes quiet is ended
# by PostgreSQL itself (the workload's idle_timeout, applied as
# idle_session_timeout / idle_in_transaction_session_timeout while the
# permit is held), and its permit returns to the pool and to the next
# waiter.  Once released, the session's own settings are back: an idle
# session without a permit is left alone.  The guard follows the permit,
# not the transaction: a session permit taken in a transaction, savepoint
# or function (SET clause) that is rolled back or returns keeps its guard,
# and one released there loses it.  A wait ended by statement_timeout counts
# as cancelled.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);
use BulkheadTest;

my $node = bulkhead_node('idle_timeout');
$node->safe_psql(
	'postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,
	                               idle_timeout)
	VALUES ('i', 1, 2, '60s', '300ms'), ('j', 1, 2, '60s', NULL);
	});
wait_loaded($node, $_, 1) for qw(i j);

sub counts
{
	my $st = stats($node, 'i');
	return "$st->{running}/$st->{queued}";
}

sub gone
{
	my ($pid, $timeout) = @_;
	return poll_until($node,
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid",
		$timeout);
}

# 1. Session permit, then idle between transactions
my $s = session($node);
my $pid = sql($s, 'SELECT pg_backend_pid()');
is(sql($s, "SELECT bulkhead_acquire('i')"), '', 'session permit taken');
ok(gone($pid, 5), 'the idle holder of a session permit is ended');
ok($node->log_contains(qr/\[$pid\].*idle-session timeout/),
	'ended by idle_session_timeout');
is(counts(), '0/0', 'its permit is returned');
close_session($s);

# 2. Transaction permit, then idle in the transaction
$s = session($node);
$pid = sql($s, 'SELECT pg_backend_pid()');
is(sql($s, "BEGIN; SELECT bulkhead_acquire_xact('i')"), '', 'transaction permit taken');
ok(gone($pid, 5), 'the idle-in-transaction holder is ended');
ok($node->log_contains(qr/\[$pid\].*idle-in-transaction timeout/),
	'ended by idle_in_transaction_session_timeout');
is(counts(), '0/0', 'its permit is returned');
close_session($s);

# 3. The permit of an idle holder goes to the waiter
my $h = session($node);
my $w = session($node);
my $hpid = sql($h, 'SELECT pg_backend_pid()');
my $wpid = sql($w, 'SELECT pg_backend_pid()');
sql($h, "SELECT bulkhead_acquire('i')");
send_async($w,
	"SELECT bulkhead_acquire('i'); SELECT bulkhead_release('i');");
ok(gone($hpid, 5), 'the idle holder is ended');
my ($out, $err) = finish_async($w);
is($err, '', 'the waiter got the permit and released it');
is(counts(), '0/0', 'running 0, queued 0');
close_session($h);

# 4. After release, the session's settings are its own again: the waiter's
#    session survives a second of idleness.
sleep(1);
is(sql($w, 'SELECT 1'), '1', 'a session idle after releasing is not ended');
is( sql($w,
		"SELECT current_setting('idle_session_timeout') || ',' || current_setting('idle_in_transaction_session_timeout')"
	),
	'0,0',
	'idle timeouts restored after release');

# 5. A session permit taken in a transaction that rolls back is kept (as a
#    session advisory lock is), and so is its guard.
$s = session($node);
$pid = sql($s, 'SELECT pg_backend_pid()');
is( sql($s, "BEGIN; SELECT bulkhead_acquire('i'); ROLLBACK; SELECT running FROM bulkhead_stats WHERE workload = 'i';"),
	"\n1",
	'session permit kept after the rollback of its transaction');
ok(gone($pid, 5),
	'the idle holder of a permit taken in a rolled back transaction is ended');
is(counts(), '0/0', 'its permit is returned');
close_session($s);

# 5b. A session permit released in a transaction that rolls back stays
#     released (as a session advisory lock unlocked does), and so does its
#     guard: the session, holding nothing, is not ended when idle.
$s = session($node);
$pid = sql($s, 'SELECT pg_backend_pid()');
is( sql($s, "SELECT bulkhead_acquire('i'); BEGIN; SELECT bulkhead_release('i'); ROLLBACK; SELECT running FROM bulkhead_stats WHERE workload = 'i';"),
	"\n\n0",
	'session permit released in a rolled back transaction stays released');
is( sql($s,
		"SELECT current_setting('idle_session_timeout') || ',' || current_setting('idle_in_transaction_session_timeout')"
	),
	'0,0',
	'idle timeouts restored after a release in a rolled back transaction');
sleep(1);
is(sql($s, 'SELECT 1'), '1',
	'a session idle after releasing in a rolled back transaction is not ended');
close_session($s);

# 5c. The same with a savepoint: a session permit taken in a rolled back
#     subtransaction keeps its guard; one released there stays released,
#     guard included.
$s = session($node);
$pid = sql($s, 'SELECT pg_backend_pid()');
is( sql($s, "BEGIN; SAVEPOINT sp; SELECT bulkhead_acquire('i'); ROLLBACK TO sp; COMMIT; SELECT running FROM bulkhead_stats WHERE workload = 'i';"),
	"\n1",
	'session permit kept after ROLLBACK TO SAVEPOINT');
ok(gone($pid, 5),
	'the idle holder of a permit taken in a rolled back subtransaction is ended');
is(counts(), '0/0', 'its permit is returned');
close_session($s);

$s = session($node);
$pid = sql($s, 'SELECT pg_backend_pid()');
is( sql($s, "SELECT bulkhead_acquire('i'); BEGIN; SAVEPOINT sp; SELECT bulkhead_release('i'); ROLLBACK TO sp; COMMIT; SELECT running FROM bulkhead_stats WHERE workload = 'i';"),
	"\n\n0",
	'session permit released in a rolled back subtransaction stays released');
sleep(1);
is(sql($s, "SELECT current_setting('idle_session_timeout')"), '0',
	'a session idle after releasing in a rolled back subtransaction is not ended');
close_session($s);

# 5d. A function's SET clause is undone when the function returns, but a
#     guard set inside the function stays while the permit is held.
$node->safe_psql(
	'postgres', q{
	CREATE FUNCTION take_i() RETURNS void LANGUAGE sql
	SET idle_session_timeout = 0
	AS $$ SELECT bulkhead_acquire('i') $$;
	GRANT EXECUTE ON FUNCTION take_i() TO PUBLIC;
	});
$s = session($node);
$pid = sql($s, 'SELECT pg_backend_pid()');
is(sql($s, 'SELECT take_i()'), '',
	'session permit taken in a function with a SET clause');
ok(gone($pid, 5),
	'the idle holder of a permit taken in a function with SET is ended');
is(counts(), '0/0', 'its permit is returned');
close_session($s);

# 6. A wait ended by statement_timeout counts as cancelled, not timed out
sql($w, "SELECT bulkhead_acquire('j')");
$s = session($node);
($out, $err) =
  sql2($s, "SET statement_timeout = '200ms'; SELECT bulkhead_acquire('j');");
like($err, qr/canceling statement due to statement timeout/,
	'statement_timeout ends the wait with its own error');
is(sql($w, "SELECT bulkhead_release('j')"), '', 'holder releases');
my $st = stats($node, 'j');
is("$st->{running}/$st->{queued}", '0/0', 'running 0, queued 0');
is($st->{cancelled}, 1, 'the wait counts as cancelled');
is($st->{timed_out}, 0, 'no wait counts as timed out');
is($st->{acquired}, $st->{released}, 'acquired = released');

close_session($_) for ($s, $w);
$node->stop;
done_testing();
