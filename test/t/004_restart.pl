# 004_restart.pl: workloads are durable.  After a clean restart, an
# immediate shutdown (crash recovery) and a crash of a backend holding a
# permit (shared memory reinitialised), the workloads are back in
# bulkhead_stats as configured, with nothing running or queued.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use BulkheadTest;

my $node = bulkhead_node('restart');
$node->append_conf('postgresql.conf', 'restart_after_crash = on');
$node->reload;
$node->safe_psql(
	'postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,
	                               statement_timeout, lock_timeout, mode)
	VALUES ('a', 2, 3, '60s', '30s', '2s', 'enforce'),
	       ('b', 1, 0, '0', NULL, NULL, 'shadow'),
	       ('c', 5, 10, '100ms', NULL, NULL, 'enforce');
	});
wait_loaded($node, 'a', 2);
wait_loaded($node, 'c', 5);

my $config_query = q{
	SELECT string_agg(workload || ':' || mode || ':' || max_running || ':' || max_queued,
	                  ',' ORDER BY workload)
	FROM bulkhead_stats};
my $counts_query = q{
	SELECT string_agg(workload || ':' || running || '/' || queued, ','
	                  ORDER BY workload)
	FROM bulkhead_stats};
my $config = $node->safe_psql('postgres', $config_query);
is($config, 'a:enforce:2:3,b:shadow:1:0,c:enforce:5:10',
	'three workloads loaded');

# Permits held and awaited when the server goes down
sub hold_permits
{
	my ($tag) = @_;
	my @s = map { session($node) } 1 .. 3;
	sql($s[0], "SELECT bulkhead_acquire('a'); SELECT bulkhead_acquire('b');");
	sql($s[1], "SELECT bulkhead_acquire('a')");
	send_async($s[2], "SELECT bulkhead_acquire('a');");
	ok( poll_until(
			$node, q{
			SELECT count(*) = 3 FROM bulkhead_activity WHERE state = 'running'}
			  . q{ AND (SELECT count(*) = 1 FROM bulkhead_activity WHERE state = 'queued')}),
		"$tag: two permits of a and one of b held, one waiter queued on a");
	return @s;
}

# After the server is back: workloads as configured, counts zero, permits
# usable again.
sub check_back
{
	my ($tag, $expected_config) = @_;
	ok( poll_until(
			$node,
			"SELECT coalesce(($config_query), '') = '$expected_config'", 30),
		"$tag: workloads present in bulkhead_stats again, as configured");
	is( $node->safe_psql('postgres', $counts_query),
		join(',', map { "$_:0/0" } split(/,/, $expected_config =~ s/:[^,]*//gr)),
		"$tag: nothing running or queued");
	is($node->safe_psql('postgres', 'SELECT count(*) FROM bulkhead_activity'),
		'0', "$tag: bulkhead_activity is empty");
	my ($ret, $out, $err) = $node->psql(
		'postgres', q{
		SELECT bulkhead_acquire('a');
		SELECT running FROM bulkhead_stats WHERE workload = 'a';
		SELECT bulkhead_release('a');
		SELECT running FROM bulkhead_stats WHERE workload = 'a';});
	is("$ret|$out|$err", "0|\n1\n\n0|", "$tag: acquire and release work");
}

#
# 1. Clean stop and start
#
my @s = hold_permits('clean restart');
$node->stop;
close_session($_) for @s;
$node->start;
check_back('clean restart', $config);

#
# 2. Immediate shutdown (crash recovery): a workload added and another one
#    changed just before are there too (the table is WAL-logged).
#
$node->safe_psql(
	'postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued) VALUES ('d', 3, 1);
	UPDATE bulkhead_workload SET max_queued = 4 WHERE name = 'c';
	});
$config = 'a:enforce:2:3,b:shadow:1:0,c:enforce:5:4,d:enforce:3:1';
ok(poll_until($node, "SELECT ($config_query) = '$config'", 10),
	'new workload d and the change of c loaded');
@s = hold_permits('immediate shutdown');
$node->stop('immediate');
close_session($_) for @s;
$node->start;
check_back('immediate shutdown', $config);

#
# 3. A backend holding permits is killed with SIGKILL: the postmaster
#    reinitialises shared memory and restarts everything, the worker
#    included.
#
my $old_worker = worker_pid($node);
@s = hold_permits('backend crash');
my $victim = sql($s[0], 'SELECT pg_backend_pid()');
kill 'KILL', $victim;
ok( poll_until(
		$node,
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'bulkhead'"
		  . " AND pid <> $old_worker", 60),
	'server back after the crash, with a new worker');
close_session($_) for @s;
check_back('backend crash', $config);

#
# 4. pg_dump keeps the workloads (pg_extension_config_dump): restored into
#    a fresh server, they are loaded there.
#
my $dumpfile = $PostgreSQL::Test::Utils::tmp_check . '/restart.dump';
$node->command_ok(
	[ 'pg_dump', '-Fc', '-f', $dumpfile, '-d', $node->connstr('postgres') ],
	'pg_dump of database postgres');
my $copy = PostgreSQL::Test::Cluster->new('restored');
$copy->init;
$copy->append_conf('postgresql.conf',
	"shared_preload_libraries = 'bulkhead'\nbulkhead.database = 'postgres'");
$copy->start;
$copy->command_ok(
	[ 'pg_restore', '-d', $copy->connstr('postgres'), $dumpfile ],
	'pg_restore into a fresh server');
ok( poll_until(
		$copy, "SELECT coalesce(($config_query), '') = '$config'", 30),
	'restored workloads are loaded by the fresh server\'s worker');
$copy->stop;

$node->stop;
done_testing();
