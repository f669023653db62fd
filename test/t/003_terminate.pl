# 003_terminate.pl: permits of a backend that ends are returned at once.
# pg_terminate_backend of a holder (session and transaction permits) and of
# a queued waiter, a client that disconnects, and a terminate racing the
# release that hands the permit to the terminated waiter.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use BulkheadTest;

my $node = bulkhead_node('terminate');
$node->safe_psql(
	'postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
	VALUES ('ts', 1, 2, '60s'), ('tx', 1, 2, '60s'), ('tr', 1, 3, '60s');
	});
wait_loaded($node, $_, 1) for qw(ts tx tr);

sub counts
{
	my ($w) = @_;
	my $st = stats($node, $w);
	return "$st->{running}/$st->{queued}";
}

#
# 1. pg_terminate_backend of a holder (session permit on ts, transaction
#    permit on tx, busy in a statement) and of a waiter queued on ts.
#
my $x = session($node);
my $y = session($node);
my $z = session($node);
my $xpid = sql($x, 'SELECT pg_backend_pid()');
my $ypid = sql($y, 'SELECT pg_backend_pid()');
my $zpid = sql($z, 'SELECT pg_backend_pid()');

is(sql($x, "SELECT bulkhead_acquire('ts')"), '', 'X takes a session permit of ts');
is(sql($x, "BEGIN; SELECT bulkhead_acquire_xact('tx')"),
	'', 'X takes a transaction permit of tx');
send_async($x, 'SELECT pg_sleep(60);');
send_async($y, "SELECT bulkhead_acquire('ts');");
send_async($z, "BEGIN; SELECT bulkhead_acquire_xact('tx');");
ok( poll_until(
		$node, q{
		SELECT count(*) = 2 FROM bulkhead_activity WHERE state = 'queued'}),
	'Y is queued on ts, Z on tx');
ok( poll_until(
		$node, qq{
		SELECT count(*) = 1 FROM pg_stat_activity
		WHERE pid = $xpid AND state = 'active' AND wait_event = 'PgSleep'}),
	'X is busy in a statement');
is( $node->safe_psql(
		'postgres', qq{
		SELECT string_agg(workload || ':' || pid || ':' || state || ':' || scope,
		                  ',' ORDER BY workload, state DESC)
		FROM bulkhead_activity}),
	"ts:$xpid:running:session,ts:$ypid:queued:session,"
	  . "tx:$xpid:running:transaction,tx:$zpid:queued:transaction",
	'activity shows both permits of X and both waiters');
is(counts('ts'), '1/1', 'ts: running 1, queued 1');
is(counts('tx'), '1/1', 'tx: running 1, queued 1');

# Y first, and only once its wait is gone X: terminated together, X's exit
# could hand its permit to Y before Y sees its own terminate, and Y's wait
# would then count as acquired and released rather than cancelled (section
# 3 covers that race on purpose).
is($node->safe_psql('postgres', "SELECT pg_terminate_backend($ypid)"),
	't', 'Y terminated');
ok( poll_until(
		$node, q{
		SELECT running = 1 AND queued = 0 FROM bulkhead_stats
		WHERE workload = 'ts'}, 3),
	"Y's wait on ts is gone within 3 s, X still holds its permit");
my $t0 = time();
is($node->safe_psql('postgres', "SELECT pg_terminate_backend($xpid)"),
	't', 'X terminated');
ok( poll_until(
		$node, q{
		SELECT running = 0 AND queued = 0 FROM bulkhead_stats
		WHERE workload = 'ts'}, 3),
	'ts returns to running 0, queued 0 within 3 s');
ok( poll_until(
		$node, qq{
		SELECT string_agg(pid || ':' || state, ',') = '$zpid:running'
		FROM bulkhead_activity WHERE workload = 'tx'}, 3),
	"X's transaction permit of tx is passed on to Z within 3 s");
note sprintf('permits returned %.3f s after the terminate', time() - $t0);
ok( poll_until(
		$node,
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid IN ($xpid, $ypid)",
		10),
	'X and Y are gone');

my ($zout, $zerr) = finish_async($z);
is($zerr, '', "Z's acquire succeeded");
sql2($z, 'COMMIT');
is(counts('tx'), '0/0', 'tx: running 0, queued 0 after Z commits');

my $st = stats($node, 'ts');
is($st->{acquired}, 1, 'ts: one permit acquired');
is($st->{released}, 1, "ts: X's permit counted as released");
is($st->{cancelled}, 1, "ts: Y's terminated wait counted as cancelled");
is($st->{timed_out}, 0, 'ts: nothing timed out');
$st = stats($node, 'tx');
is("$st->{acquired}/$st->{released}/$st->{cancelled}",
	'2/2/0', 'tx: two acquired, two released, none cancelled');

close_session($_) for ($x, $y);

#
# 2. A client that disconnects while holding a session and a transaction
#    permit.
#
my $w = session($node);
my $wpid = sql($w, 'SELECT pg_backend_pid()');
sql($w, "SELECT bulkhead_acquire('ts'); BEGIN; SELECT bulkhead_acquire_xact('tx');");
is(counts('ts') . ' ' . counts('tx'), '1/0 1/0', 'W holds ts and tx');
close_session($w);
ok( poll_until(
		$node, q{
		SELECT sum(running) = 0 AND sum(queued) = 0 FROM bulkhead_stats
		WHERE workload IN ('ts', 'tx')}, 3),
	'after the client disconnects, ts and tx return to 0 within 3 s');
ok(poll_until($node, "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $wpid", 10),
	'W is gone');

#
# 3. A queued waiter is terminated just as a release hands it the permit:
#    the permit reaches the next waiter whichever wins.
#
my $h = session($node);
my $wb = session($node);
my $bpid = sql($wb, 'SELECT pg_backend_pid()');
my @orders = (
	"pg_terminate_backend(%s), bulkhead_release('tr')",
	"bulkhead_release('tr'), pg_terminate_backend(%s)",
	"pg_terminate_backend(%s), pg_sleep(0.001), bulkhead_release('tr')",
	"bulkhead_release('tr'), pg_sleep(0.001), pg_terminate_backend(%s)",
	"pg_terminate_backend(%s), pg_sleep(0.0001), bulkhead_release('tr')",
	"bulkhead_release('tr'), pg_sleep(0.0001), pg_terminate_backend(%s)");
my $rounds = 0;
for my $order (@orders)
{
	$rounds++;
	my $wa = session($node);
	my $apid = sql($wa, 'SELECT pg_backend_pid()');
	sql($h, "SELECT bulkhead_acquire('tr')");
	send_async($wa, "SELECT bulkhead_acquire('tr');");
	poll_until($node,
		"SELECT count(*) = 1 FROM bulkhead_activity WHERE pid = $apid AND state = 'queued'"
	) or BAIL_OUT('A never queued');
	send_async($wb, "SELECT bulkhead_acquire('tr');");
	poll_until($node,
		"SELECT count(*) = 1 FROM bulkhead_activity WHERE pid = $bpid AND state = 'queued'"
	) or BAIL_OUT('B never queued');

	my $race = 'SELECT ' . sprintf($order, $apid);
	my ($out, $err) = sql2($h, $race);
	is($err, '', "race $rounds: SELECT " . sprintf($order, 'A'));
	ok( poll_until(
			$node, qq{
			SELECT coalesce(string_agg(pid || ':' || state, ','), '') = '$bpid:running'
			   AND (SELECT running = 1 AND queued = 0 FROM bulkhead_stats
			        WHERE workload = 'tr')
			FROM bulkhead_activity WHERE workload = 'tr'}, 5),
		"race $rounds: B holds the permit, nothing else is counted");
	my ($bout, $berr) = finish_async($wb);
	is($berr, '', "race $rounds: B's acquire succeeded");
	is(sql($wb, 'SELECT bulkhead_release_all()'), '1', "race $rounds: B releases");
	is(counts('tr'), '0/0', "race $rounds: running 0, queued 0");
	close_session($wa);
}
$st = stats($node, 'tr');
is($st->{acquired}, $st->{released}, 'tr: acquired = released');
is($st->{acquired} + $st->{cancelled}, 3 * $rounds,
	'tr: every terminated waiter either acquired (and released at exit) or was cancelled'
);
is($node->safe_psql('postgres', 'SELECT count(*) FROM bulkhead_activity'),
	'0', 'bulkhead_activity is empty at the end');
note 'the worker\'s reaper '
  . ($node->log_contains('left by ended processes')
	? 'freed permits of ended backends (their exit callbacks did not)'
	: 'had nothing to free: every ended backend returned its own permits');

close_session($_) for ($z, $h, $wb);
$node->stop;
done_testing();
