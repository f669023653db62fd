# 115_rename_workload.pl: a workload renamed (its rules follow through ON
# UPDATE CASCADE) or removed with its rules never fails a session that a
# rule classified with 42704, whatever the moment the worker loads the
# change at.  pgbench clients that a rule sends to the workload run
# transactions without pause (a client stops at its first error) while
# the workload is renamed 200 times, and removed and re-created every
# twentieth time.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $node = bulkhead_node('rename_workload');
$node->safe_psql(
	'postgres', q{
	CREATE ROLE app LOGIN;
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
	VALUES ('r0', 100, 0, '0');
	INSERT INTO bulkhead_rule (position, application_name, workload)
	VALUES (1, 'renamed%', 'r0');
});
wait_loaded($node, 'r0', 100);

my $script = $node->basedir . '/select.sql';
append_to_file($script, "SELECT 1;\n");
my ($out, $err) = ('', '');
local $ENV{PGAPPNAME} = 'renamed';
my $bench = IPC::Run::start(
	[
		'pgbench', '-n', '-c', '3', '-T', '600', '-f', $script,
		'-h', $node->host, '-p', $node->port, '-U', 'app', 'postgres'
	],
	'>', \$out, '2>', \$err);
ok( poll_until(
		$node, q{
		SELECT count(*) = 3 FROM pg_stat_activity
		WHERE application_name = 'renamed' AND usename = 'app'},
		30),
	'three clients run');

my $admin = session($node);
my $name = 'r0';
my $renames = 0;
for my $i (1 .. 200)
{
	my $next = "r$i";
	if ($i % 20 == 0)
	{
		# removed with its rule, then created again under a new name
		sql($admin, qq{
			BEGIN;
			DELETE FROM bulkhead_rule WHERE workload = '$name';
			DELETE FROM bulkhead_workload WHERE name = '$name';
			COMMIT;
			SELECT pg_sleep(0.01);
			BEGIN;
			INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
			VALUES ('$next', 100, 0, '0');
			INSERT INTO bulkhead_rule (position, application_name, workload)
			VALUES (1, 'renamed%', '$next');
			COMMIT;});
	}
	else
	{
		sql($admin,
			"UPDATE bulkhead_workload SET name = '$next' WHERE name = '$name'");
	}
	$name = $next;
	$renames++;
	usleep(10_000);
	$bench->pump_nb;
	last if $err =~ /ERROR/ || !$bench->pumpable;
}
is($renames, 200, '200 renames (10 of them removals) done');
wait_loaded($node, $name, 100);
$bench->pump_nb;
unlike($err, qr/does not exist|42704/,
	'no client saw a workload that does not exist');
ok($bench->pumpable, 'every pgbench client is still running');
ok( poll_until(
		$node,
		"SELECT acquired > 100 FROM bulkhead_stats WHERE workload = '$name'",
		30),
	'the clients are gated by the last workload');
diag("pgbench: $err") if $err ne '';
$bench->kill_kill;

close_session($admin);
$node->stop;
done_testing();
