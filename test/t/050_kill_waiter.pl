# 050_kill_waiter.pl: faults that hit queued backends.
#
# 1. pg_terminate_backend of a waiter in the middle of the queue (a
#    transaction-scope wait): it leaves the queue at once, counted as
#    cancelled, and the waiters before and after it are still served in
#    arrival order.
# 2. kill -9 of a queued backend (another one holds permits in two
#    workloads, a second waiter queues behind it): the postmaster
#    reinitialises shared memory and restarts every process.  Afterwards the
#    workloads are loaded again from the table, every count is 0, the
#    cumulative figures start from zero, and permits, queueing and FIFO
#    hand-off work again.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use BulkheadTest;

my $node = bulkhead_node('kill_waiter');
# the test cluster defaults to off; the crash restart is what is tested
$node->append_conf('postgresql.conf', 'restart_after_crash = on');
$node->reload;
$node->safe_psql(
	'postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
	VALUES ('q', 1, 5, '120s'), ('other', 2, 0, '0');
	});
wait_loaded($node, 'q', 1);
wait_loaded($node, 'other', 2);

my $config_query = q{
	SELECT string_agg(workload || ':' || mode || ':' || max_running || ':' || max_queued,
	                  ',' ORDER BY workload)
	FROM bulkhead_stats};
my $config = 'other:enforce:2:0,q:enforce:1:5';
is($node->safe_psql('postgres', $config_query), $config, 'two workloads loaded');

sub counts
{
	my ($w) = @_;
	my $st = stats($node, $w);
	return "$st->{running}/$st->{queued}";
}

# Start session $s waiting on workload q, and wait until it is queued.
sub queue_on_q
{
	my ($s, $pid, $query, $label) = @_;
	send_async($s, $query);
	ok( poll_until(
			$node,
			"SELECT count(*) = 1 FROM bulkhead_activity WHERE pid = $pid AND state = 'queued'"
		),
		"$label is queued on q");
	return;
}

#
# 1. Terminate the middle one of three waiters.
#
my $h = session($node);
my @w = map { session($node) } 1 .. 3;
my $hpid = sql($h, 'SELECT pg_backend_pid()');
my @wpid = map { sql($_, 'SELECT pg_backend_pid()') } @w;

is(sql($h, "SELECT bulkhead_acquire('q')"), '', 'H holds the permit of q');
queue_on_q($w[0], $wpid[0], "SELECT bulkhead_acquire('q');", 'W1');
queue_on_q($w[1], $wpid[1],
	"BEGIN; SELECT bulkhead_acquire_xact('q');", 'W2 (transaction scope)');
queue_on_q($w[2], $wpid[2], "SELECT bulkhead_acquire('q');", 'W3');
is(activity_states($node, 'q'),
	"$hpid:running,$wpid[0]:queued,$wpid[1]:queued,$wpid[2]:queued",
	'H runs; W1, W2, W3 queued in that order');

is($node->safe_psql('postgres', "SELECT pg_terminate_backend($wpid[1])"),
	't', 'W2 terminated while queued');
ok( poll_until(
		$node, qq{
		SELECT coalesce(string_agg(pid || ':' || state, ',' ORDER BY state DESC, since), '')
		       = '$hpid:running,$wpid[0]:queued,$wpid[2]:queued'
		FROM bulkhead_activity WHERE workload = 'q'}, 3),
	'W2 left the queue within 3 s; W1 and W3 keep their order');
is(counts('q'), '1/2', 'q: running 1, queued 2');

is(sql($h, "SELECT bulkhead_release('q')"), '', 'H releases');
my ($out, $err) = finish_async($w[0]);
is($err, '', 'W1, the head, is served');
is(activity_states($node, 'q'), "$wpid[0]:running,$wpid[2]:queued",
	'W1 runs, W3 still queued');
is(sql($w[0], "SELECT bulkhead_release('q')"), '', 'W1 releases');
($out, $err) = finish_async($w[2]);
is($err, '', 'W3 is served next');
is(sql($w[2], "SELECT bulkhead_release('q')"), '', 'W3 releases');
is(counts('q'), '0/0', 'q: running 0, queued 0');
my $st = stats($node, 'q');
is( "$st->{acquired}/$st->{released}/$st->{cancelled}/$st->{timed_out}",
	'3/3/1/0',
	'q: 3 acquired, 3 released, the terminated wait counted as cancelled');
close_session($_) for ($h, @w);

#
# 2. kill -9 of a queued backend.
#
$h = session($node);
@w = map { session($node) } 1 .. 2;
$hpid = sql($h, 'SELECT pg_backend_pid()');
@wpid = map { sql($_, 'SELECT pg_backend_pid()') } @w;
is( sql(
		$h,
		"SELECT bulkhead_acquire('q'); BEGIN; SELECT bulkhead_acquire_xact('other');"
	),
	"\n",
	'H holds a session permit of q and a transaction permit of other');
queue_on_q($w[0], $wpid[0], "SELECT bulkhead_acquire('q');", 'victim V');
queue_on_q($w[1], $wpid[1], "SELECT bulkhead_acquire('q');", 'W behind V');
is(counts('q') . ' ' . counts('other'), '1/2 1/0', 'q: 1 running, 2 queued; other: 1 running');

my $old_worker = worker_pid($node);
like($old_worker, qr/^\d+$/, 'the bulkhead worker runs');
my $log_offset = -s $node->logfile;
kill 'KILL', $wpid[0];
ok( poll_until(
		$node,
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'bulkhead'"
		  . " AND pid <> $old_worker", 60),
	'server back after the crash, with a new worker');
my $log = slurp_file($node->logfile, $log_offset);
like($log, qr/(?:server process|client backend) \(PID $wpid[0]\) was terminated by signal 9/,
	'the postmaster saw the queued backend killed by signal 9');
like($log, qr/all server processes terminated; reinitializing/,
	'the postmaster reinitialised shared memory');
close_session($_) for ($h, @w);
is( $node->safe_psql(
		'postgres', "SELECT count(*) FROM pg_stat_activity WHERE pid IN ($hpid, $wpid[1])"),
	'0',
	'the other sessions were ended by the crash restart');

ok(poll_until($node, "SELECT coalesce(($config_query), '') = '$config'", 30),
	'workloads loaded again from the table');
is(all_counts($node),
	'other:0/0/0/0/0,q:0/0/0/0/0',
	'every count is 0 and the cumulative figures start from zero');
is($node->safe_psql('postgres', 'SELECT count(*) FROM bulkhead_activity'),
	'0', 'bulkhead_activity is empty');

# Permits, queueing and hand-off work as before
$h = session($node);
my $w2 = session($node);
$hpid = sql($h, 'SELECT pg_backend_pid()');
my $w2pid = sql($w2, 'SELECT pg_backend_pid()');
is(sql($h, "SELECT bulkhead_acquire('q')"), '', 'after the crash: H acquires q');
is(sql($w2, "SELECT bulkhead_try_acquire('q')"), 'f', 'a second caller is not let in');
queue_on_q($w2, $w2pid, "SELECT bulkhead_acquire('q');", 'after the crash: W');
is(sql($h, "SELECT bulkhead_release('q')"), '', 'H releases');
($out, $err) = finish_async($w2);
is($err, '', 'W is served');
is(sql($w2, 'SELECT bulkhead_release_all()'), '1', 'W releases');
is(counts('q') . ' ' . counts('other'), '0/0 0/0', 'running 0, queued 0 everywhere');
$st = stats($node, 'q');
is("$st->{acquired}/$st->{released}/$st->{cancelled}", '2/2/0',
	'q: 2 acquired, 2 released since the crash');
ok(!$node->log_contains('left by ended processes', $log_offset),
	'after the crash no stale entry had to be freed');

close_session($_) for ($h, $w2);
$node->stop;
done_testing();
