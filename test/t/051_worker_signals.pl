# 051_worker_signals.pl: the bulkhead worker ended by a signal.
#
# 1. SIGTERM (what pg_terminate_backend sends, here from outside with
#    kill): the worker exits with status 1 and the postmaster starts it
#    again after its restart interval.  Permits held (session and
#    transaction scope) and callers queued are untouched meanwhile and
#    afterwards, and a configuration change made after the restart is
#    applied (a raised limit serves the queued caller at once).
# 2. SIGKILL: PostgreSQL treats it as a crash and restarts the whole
#    cluster.  The workloads are loaded again from the table, every count
#    is 0, the cumulative figures start from zero, and permits work again.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);
use BulkheadTest;

my $node = bulkhead_node('worker_signals');
# the test cluster defaults to off; part 2 needs the crash restart
$node->append_conf('postgresql.conf', 'restart_after_crash = on');
$node->reload;
$node->safe_psql(
	'postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
	VALUES ('s', 2, 2, '120s'), ('t', 1, 1, '120s');
	});
wait_loaded($node, 's', 2);
wait_loaded($node, 't', 1);

sub counts
{
	my ($w) = @_;
	my $st = stats($node, $w);
	return "$st->{running}/$st->{queued}";
}

my $all_activity = q{
	SELECT coalesce(string_agg(workload || ':' || pid || ':' || state || ':' || scope
	                           || ':' || since, ',' ORDER BY workload, pid), '')
	FROM bulkhead_activity};

#
# 1. SIGTERM
#
my @h = map { session($node) } 1 .. 2;
my $q = session($node);
my @hpid = map { sql($_, 'SELECT pg_backend_pid()') } @h;
my $qpid = sql($q, 'SELECT pg_backend_pid()');

is(sql($h[0], "SELECT bulkhead_acquire('s')"), '', 'H1 holds a session permit of s');
is( sql(
		$h[1],
		"SELECT bulkhead_acquire('s'); BEGIN; SELECT bulkhead_acquire_xact('t');"),
	"\n",
	'H2 holds a session permit of s and, in an open transaction, one of t');
send_async($q, "SELECT bulkhead_acquire('s');");
ok( poll_until(
		$node,
		"SELECT count(*) = 1 FROM bulkhead_activity WHERE pid = $qpid AND state = 'queued'"
	),
	'Q is queued on s');
my $before = $node->safe_psql('postgres', $all_activity);
is(counts('s') . ' ' . counts('t'), '2/1 1/0', 's: 2 running, 1 queued; t: 1 running');

my $old = worker_pid($node);
like($old, qr/^\d+$/, 'one bulkhead worker runs');
my $log_offset = -s $node->logfile;
my $t0 = time();
is(kill('TERM', $old), 1, 'SIGTERM sent to the worker');
ok( poll_until(
		$node, "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $old", 10),
	'the worker exits');
ok( $node->wait_for_log(
		qr/background worker "bulkhead" \(PID $old\) exited with exit code 1/,
		$log_offset),
	'it exits with status 1, so the postmaster will start it again');
is($node->safe_psql('postgres', $all_activity),
	$before, 'while the worker is down, permits and waiter are untouched');

ok( poll_until(
		$node, qq{
		SELECT count(*) = 1 FROM pg_stat_activity
		WHERE backend_type = 'bulkhead' AND pid <> $old}, 30),
	'the postmaster starts a new worker');
my $new = worker_pid($node);
note sprintf('new worker %s up %.1f s after SIGTERM', $new, time() - $t0);
ok(time() - $t0 >= 4, 'after the restart interval (5 s)');

# The new worker loads the table and looks for ended backends a few times:
# it must neither reset nor free anything held or awaited.
sleep(2.5);
is($node->safe_psql('postgres', $all_activity),
	$before, 'after the restart, the same permits are held and the same caller queued');
is(counts('s') . ' ' . counts('t'), '2/1 1/0', 'and the counts are unchanged');
my ($ret, $out, $err) = $node->psql('postgres', "SELECT bulkhead_try_acquire('t')");
is("$ret|$out|$err", '0|f|', 't is still full for a newcomer');

# A change after the restart reaches the new worker: a raised limit serves
# Q at once.
$node->safe_psql('postgres', "UPDATE bulkhead_workload SET max_running = 3 WHERE name = 's'");
ok( poll_until(
		$node,
		"SELECT count(*) = 1 FROM bulkhead_activity WHERE pid = $qpid AND state = 'running'",
		3),
	'UPDATE max_running = 3 after the restart serves Q within 3 s');
($out, $err) = finish_async($q);
is($err, '', "Q's acquire succeeded");
is( $node->safe_psql(
		'postgres', "SELECT max_running FROM bulkhead_stats WHERE workload = 's'"),
	'3',
	'bulkhead_stats shows the new limit');

is(sql($h[1], 'COMMIT'), '', "H2 commits: its transaction permit of t ends");
is(sql($_, 'SELECT bulkhead_release_all()'), '1', 'a holder of s releases')
  for (@h, $q);
is(counts('s') . ' ' . counts('t'), '0/0 0/0', 'running 0, queued 0 everywhere');
my $st = stats($node, 's');
is("$st->{acquired}/$st->{released}/$st->{cancelled}", '3/3/0',
	's: 3 acquired, 3 released, nothing cancelled');
ok(!$node->log_contains('left by ended processes', $log_offset),
	'the worker freed no permit of a live backend');
close_session($_) for (@h, $q);

#
# 2. SIGKILL: a crash restart of the whole cluster.
#
@h = map { session($node) } 1 .. 2;
@hpid = map { sql($_, 'SELECT pg_backend_pid()') } @h;
is(sql($h[0], "SELECT bulkhead_acquire('t')"), '', 'H1 holds t');
send_async($h[1], "SELECT bulkhead_acquire('t');");
ok( poll_until(
		$node,
		"SELECT count(*) = 1 FROM bulkhead_activity WHERE pid = $hpid[1] AND state = 'queued'"
	),
	'H2 is queued on t');

$old = worker_pid($node);
$log_offset = -s $node->logfile;
is(kill('KILL', $old), 1, 'SIGKILL sent to the worker');
ok( poll_until(
		$node,
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'bulkhead'"
		  . " AND pid <> $old", 60),
	'server back after the crash, with a new worker');
my $log = slurp_file($node->logfile, $log_offset);
like(
	$log,
	qr/background worker "bulkhead" \(PID $old\) was terminated by signal 9/,
	'the postmaster saw the worker killed by signal 9');
like($log, qr/all server processes terminated; reinitializing/,
	'and restarted the cluster');
close_session($_) for @h;
is( $node->safe_psql(
		'postgres', "SELECT count(*) FROM pg_stat_activity WHERE pid IN ($hpid[0], $hpid[1])"),
	'0',
	'the sessions were ended by the crash restart');

ok( poll_until(
		$node, q{
		SELECT coalesce(string_agg(workload || ':' || max_running || ':' || max_queued,
		                           ',' ORDER BY workload), '') = 's:3:2,t:1:1'
		FROM bulkhead_stats}, 30),
	'workloads loaded again from the table (with the change of part 1)');
is(all_counts($node),
	's:0/0/0/0/0,t:0/0/0/0/0',
	'every count is 0 and the cumulative figures start from zero');
is($node->safe_psql('postgres', 'SELECT count(*) FROM bulkhead_activity'),
	'0', 'bulkhead_activity is empty');
($ret, $out, $err) = $node->psql(
	'postgres', q{
	SELECT bulkhead_acquire('t');
	SELECT running FROM bulkhead_stats WHERE workload = 't';
	SELECT bulkhead_release('t');
	SELECT running FROM bulkhead_stats WHERE workload = 't';});
is("$ret|$out|$err", "0|\n1\n\n0|", 'acquire and release work after the crash');

# and the restarted worker still applies changes
$node->safe_psql('postgres', "UPDATE bulkhead_workload SET max_queued = 7 WHERE name = 't'");
ok( poll_until(
		$node,
		"SELECT count(*) = 1 FROM bulkhead_stats WHERE workload = 't' AND max_queued = 7",
		3),
	'a change after the crash reaches bulkhead_stats within 3 s');

$node->stop;
done_testing();
