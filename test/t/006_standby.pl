# 006_standby.pl: on a hot standby the worker reads the replicated table,
# read-only sessions take and return permits (with their own counts, apart
# from the primary's), and changes made on the primary reach the standby's
# bulkhead_stats by polling within a few seconds.

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
	VALUES ('w', 1, 2, '60s'), ('x', 4, 0, '0');
	});
wait_loaded($primary, 'w', 1);

$primary->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
$standby->start;

is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'),
	't', 'the standby is in recovery');
ok( poll_until(
		$standby, q{
		SELECT string_agg(workload || ':' || max_running || ':' || max_queued, ','
		                  ORDER BY workload) = 'w:1:2,x:4:0'
		FROM bulkhead_stats}, 30),
	'the standby worker loaded the workloads');
is( $standby->safe_psql(
		'postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'bulkhead'"),
	'1',
	'a bulkhead worker runs on the standby');

# Read-only sessions on the standby take, wait for and return permits
my $s1 = session($standby);
my $s2 = session($standby);
my $s2pid = sql($s2, 'SELECT pg_backend_pid()');
is(sql($s1, 'SHOW transaction_read_only'), 'on', 'standby sessions are read-only');
is(sql($s1, "SELECT bulkhead_acquire('w')"), '', 'acquire on the standby');
is(sql($s2, "SELECT bulkhead_try_acquire('w')"), 'f',
	'try_acquire on the standby sees the permit taken');
send_async($s2, "SELECT bulkhead_acquire('w');");
ok( poll_until(
		$standby,
		"SELECT count(*) = 1 FROM bulkhead_activity WHERE pid = $s2pid AND state = 'queued'"
	),
	'a second standby session waits in the queue');
is( $standby->safe_psql(
		'postgres', "SELECT running || '/' || queued FROM bulkhead_stats WHERE workload = 'w'"),
	'1/1',
	'standby: running 1, queued 1');
is( $primary->safe_psql(
		'postgres', "SELECT running || '/' || queued FROM bulkhead_stats WHERE workload = 'w'"),
	'0/0',
	'the primary has its own counts: running 0, queued 0');
is(sql($s1, "SELECT bulkhead_release('w')"), '', 'release on the standby');
ok( poll_until(
		$standby,
		"SELECT count(*) = 1 FROM bulkhead_activity WHERE pid = $s2pid AND state = 'running'",
		3),
	'the waiter on the standby is served');
my ($out, $err) = finish_async($s2);
is($err, '', "the standby waiter's acquire succeeded");
is(sql($s2, 'SELECT bulkhead_release_all()'), '1', 'the standby waiter releases');
is( sql(
		$s1,
		"BEGIN; SELECT bulkhead_acquire_xact('x'); SELECT running FROM bulkhead_stats WHERE workload = 'x'; COMMIT;"
	),
	"\n1",
	'transaction permit in a read-only transaction on the standby');
is( $standby->safe_psql(
		'postgres', q{
		SELECT sum(running) || '/' || sum(queued) || '/' || sum(acquired) || '/' || sum(released)
		FROM bulkhead_stats}),
	'0/0/3/3',
	'standby: all returned, acquired = released = 3');

# The table cannot be changed on the standby
my ($ret, $o, $e) = $standby->psql('postgres',
	"UPDATE bulkhead_workload SET max_running = 9 WHERE name = 'w'");
like($e, qr/read-only transaction/, 'the table is read-only on the standby');

# Changes on the primary reach the standby's worker by polling
$primary->safe_psql(
	'postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued) VALUES ('y', 7, 3);
	UPDATE bulkhead_workload SET max_running = 2 WHERE name = 'w';
	DELETE FROM bulkhead_workload WHERE name = 'x';
	});
$primary->wait_for_catchup($standby);
ok( poll_until(
		$standby, q{
		SELECT string_agg(workload || ':' || max_running || ':' || max_queued, ','
		                  ORDER BY workload) = 'w:2:2,y:7:3'
		FROM bulkhead_stats}, 5),
	'INSERT, UPDATE and DELETE on the primary reach the standby within 5 s of replay');

# The raised limit applies on the standby
is( sql(
		$s1,
		"SELECT bulkhead_acquire('w'); SELECT bulkhead_try_acquire('y');"),
	"\nt",
	'the new workload and the raised limit are usable on the standby');
is(sql($s2, "SELECT bulkhead_try_acquire('w')"), 't',
	'max_running 2 lets a second standby session in');
is(sql($_, 'SELECT bulkhead_release_all()'), $_ == $s1 ? '2' : '1',
	'standby sessions release') for ($s1, $s2);
is( $standby->safe_psql(
		'postgres', 'SELECT sum(running) || \'/\' || sum(queued) FROM bulkhead_stats'),
	'0/0',
	'standby: running 0, queued 0 at the end');

# Promotion: a permit held across it stays held, and on the new primary a
# committed change reaches bulkhead_stats through the trigger again.
is(sql($s1, "SELECT bulkhead_acquire('y')"), '', 'a standby session holds a permit of y');
$primary->stop;
$standby->promote;
is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'),
	'f', 'the standby is promoted');
is( $standby->safe_psql(
		'postgres', "SELECT running FROM bulkhead_stats WHERE workload = 'y'"),
	'1',
	'the permit taken before the promotion is still counted');
$standby->safe_psql('postgres',
	"UPDATE bulkhead_workload SET max_running = 8 WHERE name = 'y'");
ok( poll_until(
		$standby,
		"SELECT count(*) = 1 FROM bulkhead_stats WHERE workload = 'y' AND max_running = 8",
		3),
	'a change on the promoted server reaches bulkhead_stats within 3 s');
is(sql($s1, "SELECT bulkhead_release('y')"), '',
	'the permit taken before the promotion is released');
is( $standby->safe_psql(
		'postgres', q{SELECT sum(running) || '/' || sum(queued) FROM bulkhead_stats}),
	'0/0',
	'running 0, queued 0 after the promotion');

close_session($_) for ($s1, $s2);
$standby->stop;
done_testing();
