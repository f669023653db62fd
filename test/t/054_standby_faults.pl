# 054_standby_faults.pl: faults on a hot standby (built with backup /
# init_from_backup, streaming the workload table from the primary).
#
# 1. The standby's worker is terminated while a standby session holds a
#    permit and another waits: both are untouched, the postmaster starts a
#    new worker, and a change made on the primary meanwhile reaches the
#    standby's shared memory; the raised limit serves the waiter.
# 2. A standby backend holding a permit is killed with SIGKILL: the standby
#    reinitialises and goes back into recovery; its worker loads the
#    replicated table again, every count is 0, read-only sessions acquire
#    and release, and later changes on the primary still arrive.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use BulkheadTest;

my $primary = bulkhead_node('primary', allows_streaming => 1);
$primary->safe_psql(
	'postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
	VALUES ('w', 1, 2, '120s');
	});
wait_loaded($primary, 'w', 1);

$primary->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
$standby->append_conf('postgresql.conf', 'restart_after_crash = on');
$standby->start;
is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'),
	't', 'the standby is in recovery');
wait_loaded($standby, 'w', 1);

sub standby_config
{
	return $standby->safe_psql(
		'postgres', q{
		SELECT coalesce(string_agg(workload || ':' || max_running || ':' || max_queued
		                           || ':' || running || '/' || queued, ',' ORDER BY workload), '')
		FROM bulkhead_stats});
}

#
# 1. The standby's worker terminated
#
my $s1 = session($standby);
my $s2 = session($standby);
my $s1pid = sql($s1, 'SELECT pg_backend_pid()');
my $s2pid = sql($s2, 'SELECT pg_backend_pid()');
is(sql($s1, "SELECT bulkhead_acquire('w')"), '', 'S1 holds w on the standby');
send_async($s2, "SELECT bulkhead_acquire('w');");
ok( poll_until(
		$standby,
		"SELECT count(*) = 1 FROM bulkhead_activity WHERE pid = $s2pid AND state = 'queued'"
	),
	'S2 is queued on w on the standby');

my $old = worker_pid($standby);
like($old, qr/^\d+$/, 'a bulkhead worker runs on the standby');
is($standby->safe_psql('postgres', "SELECT pg_terminate_backend($old)"),
	't', "the standby's worker is terminated");
ok( poll_until(
		$standby, "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $old", 10),
	'it exits');
$primary->safe_psql('postgres',
	"UPDATE bulkhead_workload SET max_running = 2 WHERE name = 'w'");
$primary->wait_for_catchup($standby);
# read before checking that no worker runs: a worker that has loaded is
# visible, so if none runs afterwards the figures are from while it was down
my $config_down = standby_config();
SKIP:
{
	skip 'the new worker was up before the figures were read', 1
	  if worker_pid($standby) ne '';
	is($config_down, 'w:1:2:1/1',
		'while the worker is down the standby keeps its permits, waiter and limits');
}
ok( poll_until(
		$standby, qq{
		SELECT count(*) = 1 FROM pg_stat_activity
		WHERE backend_type = 'bulkhead' AND pid <> $old}, 30),
	'a new worker starts on the standby');
ok( poll_until(
		$standby,
		"SELECT count(*) = 1 FROM bulkhead_activity WHERE pid = $s2pid AND state = 'running'",
		10),
	'the change made on the primary meanwhile is loaded and serves S2');
my ($out, $err) = finish_async($s2);
is($err, '', "S2's acquire succeeded");
is(standby_config(), 'w:2:2:2/0', 'standby: max_running 2, running 2');
is(sql($_, 'SELECT bulkhead_release_all()'), '1', 'a standby session releases')
  for ($s1, $s2);
is(standby_config(), 'w:2:2:0/0', 'standby: running 0, queued 0');
close_session($_) for ($s1, $s2);

#
# 2. kill -9 of a standby backend holding a permit
#
$s1 = session($standby);
$s2 = session($standby);
$s1pid = sql($s1, 'SELECT pg_backend_pid()');
is(sql($s1, "SELECT bulkhead_acquire('w')"), '', 'S1 holds w');
is(sql($s2, "SELECT bulkhead_acquire('w')"), '', 'S2 holds w');
is(standby_config(), 'w:2:2:2/0', 'standby: running 2');

$old = worker_pid($standby);
my $log_offset = -s $standby->logfile;
kill 'KILL', $s1pid;
ok( poll_until(
		$standby,
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'bulkhead'"
		  . " AND pid <> $old", 60),
	'the standby is back after the crash, with a new worker');
like(
	slurp_file($standby->logfile, $log_offset),
	qr/(?:server process|client backend) \(PID $s1pid\) was terminated by signal 9/,
	'the standby postmaster saw the backend killed by signal 9');
close_session($_) for ($s1, $s2);
is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'),
	't', 'the standby is in recovery again');
ok(poll_until($standby, "SELECT (" . q{
		SELECT coalesce(string_agg(workload || ':' || max_running || ':' || max_queued
		                           || ':' || running || '/' || queued, ',' ORDER BY workload), '')
		FROM bulkhead_stats} . ") = 'w:2:2:0/0'", 30),
	'the workloads are loaded again from the replicated table, every count 0');
is($standby->safe_psql('postgres', 'SELECT count(*) FROM bulkhead_activity'),
	'0', 'bulkhead_activity is empty on the standby');
my ($ret, $o, $e) = $standby->psql(
	'postgres', q{
	SELECT bulkhead_acquire('w');
	SELECT running FROM bulkhead_stats WHERE workload = 'w';
	SELECT bulkhead_release('w');});
is("$ret|$o|$e", "0|\n1\n|", 'a read-only session acquires and releases after the crash');

$primary->safe_psql(
	'postgres', q{
	INSERT INTO bulkhead_workload (name, max_running) VALUES ('v', 5);
	UPDATE bulkhead_workload SET max_queued = 9 WHERE name = 'w';
	});
$primary->wait_for_catchup($standby);
ok(poll_until($standby, "SELECT (" . q{
		SELECT coalesce(string_agg(workload || ':' || max_running || ':' || max_queued,
		                           ',' ORDER BY workload), '')
		FROM bulkhead_stats} . ") = 'v:5:0,w:2:9'", 5),
	'changes on the primary still reach the standby within 5 s of replay');
is( $primary->safe_psql(
		'postgres', 'SELECT sum(running) || \'/\' || sum(queued) || \'/\' || sum(acquired) FROM bulkhead_stats'),
	'0/0/0',
	'the primary never counted any of it');

$standby->stop;
$primary->stop;
done_testing();
