# 052_missing_database.pl: bulkhead.database missing, then created, then
# dropped.
#
# 1. The database does not exist at start: the worker logs it clearly and
#    retries (every 5 s); acquire fails at once with 42704 saying the
#    definitions are not loaded, never waits.
# 2. Once the database and the extension exist, the worker connects and
#    loads the workloads on its next try.
# 3. A plain DROP DATABASE is refused while the worker is connected; DROP
#    DATABASE ... WITH (FORCE) ends the worker.  A permit held across the
#    drop can still be released and hands off to the caller queued behind
#    it, and the worker is back to retrying.  The definitions went with the
#    database: a new acquire fails at once with 42704 (not a hang, not a
#    permit of a workload that no longer exists).
# 4. Re-created, the database is picked up again.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use BulkheadTest;

my $node = PostgreSQL::Test::Cluster->new('missing_db');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'bulkhead'\n"
	  . "bulkhead.database = 'bhdb'\n"
	  . "log_line_prefix = '%m [%p] %b '\n");
$node->start;
# the functions and views, in a database that is not bulkhead.database
$node->safe_psql('postgres', 'CREATE EXTENSION bulkhead');

my $fatal = qr/FATAL:\s+database "bhdb" does not exist/;

# Number of times the worker failed to connect so far
sub connect_failures
{
	my @m = slurp_file($node->logfile) =~ /$fatal/g;
	return scalar @m;
}

# Wait (bounded) until at least $n failed connections are logged
sub wait_failures
{
	my ($n, $timeout) = @_;
	my $t0 = time();
	sleep(0.2) while connect_failures() < $n && time() - $t0 < $timeout;
	return connect_failures() >= $n;
}

# Run an acquire-type call in a new session; returns (elapsed seconds,
# SQLSTATE or 'ok', stderr).
sub try_call
{
	my ($call) = @_;
	my $t0 = time();
	my ($ret, $out, $err) = $node->psql(
		'postgres', "$call;\n\\echo :LAST_ERROR_SQLSTATE\n",
		on_error_stop => 0,
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	my $elapsed = time() - $t0;
	my ($state) = $out =~ /(\w{5})\s*$/;
	$state = 'ok' if $err eq '';
	return ($elapsed, $state // '?', $err);
}

#
# 1. The database does not exist at start
#
ok($node->wait_for_log($fatal), 'the worker logs that database "bhdb" does not exist');
my $t0 = time();
ok(wait_failures(2, 20), 'and retries (a second failed connection is logged)');
note sprintf('%d connection attempts seen in %.1f s', connect_failures(), time() - $t0);
ok( $node->log_contains(qr/background worker "bulkhead" \(PID \d+\) exited with exit code 1/),
	'the worker exits with status 1 each time (the postmaster restarts it)');

for my $call (
	"SELECT bulkhead_acquire('w')",
	"SELECT bulkhead_acquire('w', '10s')",
	"SELECT bulkhead_try_acquire('w', '10s')",
	"BEGIN; SELECT bulkhead_acquire_xact('w', '10s')")
{
	my ($elapsed, $state, $err) = try_call($call);
	is($state, '42704', "$call: 42704 while nothing is loaded");
	like($err, qr/workload "w" does not exist/, "$call: message");
	like($err, qr/not loaded the workload definitions yet/, "$call: detail says why");
	like($err, qr/database "bhdb"/, "$call: hint names the database");
	ok($elapsed < 5, sprintf('%s: fails at once (%.2f s)', $call, $elapsed));
}
is($node->safe_psql('postgres', 'SELECT count(*) FROM bulkhead_stats'),
	'0', 'bulkhead_stats is empty');
my ($elapsed, $state, $err) = try_call("SELECT bulkhead_release('w')");
is($state, '55000', 'release of a permit not held: 55000');
is($node->safe_psql('postgres', 'SELECT bulkhead_release_all()'), '0',
	'release_all: nothing held');

# Changes of the table in another database are refused, naming bhdb
my ($ret, $out, $e) = $node->psql('postgres',
	"INSERT INTO bulkhead_workload (name, max_running) VALUES ('w', 1)");
like($e, qr/can only be changed in database "bhdb"/,
	'INSERT outside bulkhead.database is refused, naming it');

#
# 2. Created: the worker connects on its next try and loads the table
#
$node->safe_psql('postgres', 'CREATE DATABASE bhdb');
$node->safe_psql(
	'bhdb', q{
	CREATE EXTENSION bulkhead;
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
	VALUES ('w', 1, 1, '60s');
	});
$t0 = time();
ok( poll_until(
		$node,
		"SELECT count(*) = 1 FROM bulkhead_stats WHERE workload = 'w' AND max_running = 1",
		20),
	'once bhdb and the extension exist, the worker loads the workload');
note sprintf('loaded %.1f s after the database was created', time() - $t0);
ok( poll_until(
		$node,
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'bulkhead' AND datname = 'bhdb'",
		5),
	'the worker is connected to bhdb');

my $h = session($node);
my $q = session($node);
my $qpid = sql($q, 'SELECT pg_backend_pid()');
is(sql($h, "SELECT bulkhead_acquire('w')"), '', 'H acquires w (from database postgres)');
send_async($q, "SELECT bulkhead_acquire('w');");
ok( poll_until(
		$node,
		"SELECT count(*) = 1 FROM bulkhead_activity WHERE pid = $qpid AND state = 'queued'"
	),
	'Q is queued on w');

#
# 3. Dropped
#
($ret, $out, $e) = $node->psql('postgres', 'DROP DATABASE bhdb');
like($e, qr/database "bhdb" is being accessed by other users/,
	'plain DROP DATABASE is refused while the worker is connected');

my $failures = connect_failures();
my $worker = worker_pid($node);
$node->safe_psql('postgres', 'DROP DATABASE bhdb WITH (FORCE)');
ok( poll_until(
		$node, "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $worker", 10),
	'DROP DATABASE ... WITH (FORCE) ends the worker');
ok(wait_failures($failures + 1, 20),
	'the worker is back to retrying, logging that bhdb does not exist');

is( $node->safe_psql(
		'postgres', "SELECT string_agg(pid || ':' || state, ',' ORDER BY state DESC) FROM bulkhead_activity"),
	sql($h, 'SELECT pg_backend_pid()') . ":running,$qpid:queued",
	'the permit held and the caller queued are untouched by the drop');
is(sql($h, "SELECT bulkhead_release('w')"), '', 'H releases its permit across the drop');
($out, $err) = finish_async($q);
is($err, '', 'Q, queued across the drop, is served');
is(sql($q, "SELECT bulkhead_release('w')"), '', 'Q releases');
is($node->safe_psql('postgres', 'SELECT count(*) FROM bulkhead_activity'),
	'0', 'nothing held or queued');

# shared memory may learn of the drop a moment after the worker's failed
# reconnection: poll a little, each call bounded
for my $call ("SELECT bulkhead_acquire('w', '10s')", "SELECT bulkhead_try_acquire('w')")
{
	my $slowest = 0;
	$t0 = time();
	while (1)
	{
		($elapsed, $state, $err) = try_call($call);
		$slowest = $elapsed if $elapsed > $slowest;
		last if $state eq '42704' || time() - $t0 > 5;
		sleep(0.2);
	}
	is($state, '42704',
		"$call after the drop: 42704, the definitions went with the database");
	ok($slowest < 5, sprintf('%s after the drop: never waits (%.2f s)', $call, $slowest));
}
is($node->safe_psql('postgres', 'SELECT count(*) FROM bulkhead_stats'),
	'0', 'bulkhead_stats is empty after the drop');
close_session($_) for ($h, $q);

#
# 4. Re-created
#
$node->safe_psql('postgres', 'CREATE DATABASE bhdb');
$node->safe_psql(
	'bhdb', q{
	CREATE EXTENSION bulkhead;
	INSERT INTO bulkhead_workload (name, max_running) VALUES ('w2', 2);
	});
ok( poll_until(
		$node, q{
		SELECT coalesce(string_agg(workload || ':' || max_running, ','), '') = 'w2:2'
		FROM bulkhead_stats}, 20),
	'the re-created database is loaded: w2 only');
($ret, $out, $e) = $node->psql(
	'postgres', "SELECT bulkhead_acquire('w2'); SELECT bulkhead_release('w2');");
is("$ret|$e", '0|', 'w2 can be acquired and released');

$node->stop;
done_testing();
