# Transparent admission end to end: 20 pgbench clients logged in as a role
# with bulkhead.workload set, running a plain "SELECT pg_sleep(0.05)"
# script, never run more than B at once; rejection and timeout of a gated
# statement carry SQLSTATEs 53B01 and 53B02.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $B = 3;
my $node = bulkhead_node('transparent');
$node->safe_psql('postgres', qq{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
	VALUES ('reporting', $B, 100, '30s'), ('tiny', 1, 0, '0'), ('short', 1, 1, '100ms');
	CREATE ROLE reporter LOGIN;
	ALTER ROLE reporter SET bulkhead.workload = 'reporting';
	CREATE ROLE tiny_app LOGIN;
	ALTER ROLE tiny_app SET bulkhead.workload = 'tiny';
	CREATE ROLE short_app LOGIN;
	ALTER ROLE short_app SET bulkhead.workload = 'short';
});
wait_loaded($node, 'reporting', $B);
wait_loaded($node, 'tiny', 1);
wait_loaded($node, 'short', 1);

# --- 20 pgbench clients, unchanged script ------------------------------------
my $script = $node->basedir . '/sleep.sql';
PostgreSQL::Test::Utils::append_to_file($script,
	"\\set x 1\nSELECT pg_sleep(0.05);\n");

# a monitor samples shared memory while pgbench runs
my $monitor = session($node);
sql($monitor, 'CREATE TABLE samples (running int, queued int)');
send_async($monitor, q{
	DO $$
	BEGIN
		FOR i IN 1..5000 LOOP
			INSERT INTO samples SELECT running, queued FROM bulkhead_stats WHERE workload = 'reporting';
			PERFORM pg_sleep(0.002);
			PERFORM pg_stat_clear_snapshot();
			-- done once pgbench's clients have run and gone (not before they came)
			EXIT WHEN i > 50
				AND (SELECT acquired > 0 FROM bulkhead_stats WHERE workload = 'reporting')
				AND (SELECT count(*) FROM pg_stat_activity WHERE usename = 'reporter') = 0;
		END LOOP;
	END $$;
});

my ($stdout, $stderr);
my $ok = IPC::Run::run(
	[
		'pgbench', '-n', '-c', '20', '-j', '2', '-T', '5', '-f', $script,
		'-U', 'reporter', '-h', $node->host, '-p', $node->port, 'postgres'
	],
	'>', \$stdout, '2>', \$stderr);
ok($ok, 'pgbench ran') or diag $stderr;
like($stdout, qr/number of failed transactions: 0 /, 'no transaction failed');
my ($tx) = $stdout =~ /number of transactions actually processed: (\d+)/;
ok($tx > 0, "$tx transactions");

my ($out, $err) = finish_async($monitor);
is($err, '', 'the monitor ran');
my ($samples, $max_running, $max_queued) = split /\|/,
  $node->safe_psql('postgres', 'SELECT count(*), max(running), max(queued) FROM samples');
ok($samples > 50, "$samples samples taken");
is($max_running, $B, "the server never ran more than B = $B at once (sampled)");
ok($max_queued > 0, "the others queued ($max_queued at most)");
is( $node->safe_psql('postgres',
		"SELECT peak_running || ' ' || acquired || ' ' || released || ' ' || running FROM bulkhead_stats WHERE workload = 'reporting'"
	),
	"$B $tx $tx 0",
	'peak_running = B, one permit per transaction, all returned');
close_session($monitor);

# --- rejection and timeout, with their SQLSTATEs ------------------------------
# tiny: B=1, Q=0; short: B=1, Q=1, queue_timeout 100 ms
foreach my $case (['tiny_app', 'tiny', '53B01', qr/workload "tiny" is full/],
	['short_app', 'short', '53B02', qr/timed out waiting for a permit of workload "short"/])
{
	my ($role, $w, $sqlstate, $message) = @$case;
	my $holder = $node->background_psql('postgres', on_error_stop => 0,
		extra_params => ['-U', $role]);
	$holder->query_safe('BEGIN');
	$holder->query_safe('SELECT 1');
	is( $node->safe_psql('postgres',
			"SELECT state || ' ' || scope FROM bulkhead_activity WHERE workload = '$w'"),
		'running auto',
		"$role\'s open transaction holds the permit of $w");
	my ($ret, $o, $e) = $node->psql('postgres', "\\set VERBOSITY verbose\nSELECT 1",
		extra_params => ['-U', $role]);
	isnt($ret, 0, "a second transaction of $role fails");
	like($e, qr/ERROR:  $sqlstate: /, "with SQLSTATE $sqlstate");
	like($e, $message, 'and its message');
	$holder->query_safe('COMMIT');
	$holder->quit;
	is($node->safe_psql('postgres', "SELECT running FROM bulkhead_stats WHERE workload = '$w'"),
		'0', 'the permit is back');
}

# --- set per database, and per role in a database ----------------------------
$node->safe_psql('postgres', q{
	CREATE DATABASE batch;
	ALTER DATABASE batch SET bulkhead.workload = 'tiny';
	CREATE ROLE analyst LOGIN;
	ALTER ROLE analyst IN DATABASE postgres SET bulkhead.workload = 'short';
});
$node->safe_psql('batch', 'CREATE EXTENSION bulkhead');
my $scope_of = q{SELECT string_agg(workload || ':' || scope, ',') FROM bulkhead_activity WHERE pid = pg_backend_pid()};
is($node->safe_psql('batch', $scope_of, extra_params => ['-U', 'analyst']),
	'tiny:auto', 'ALTER DATABASE ... SET gates the database');
is($node->safe_psql('postgres', $scope_of, extra_params => ['-U', 'analyst']),
	'short:auto', 'ALTER ROLE ... IN DATABASE ... SET gates the role there');
is($node->safe_psql('batch', $scope_of), '',
	'a superuser is exempt by default');

$node->stop;
done_testing();
