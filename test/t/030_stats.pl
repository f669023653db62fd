# Statistics: a measured wait lands in the right histogram bucket; the
# cumulative figures survive a clean restart and are discarded after a
# crash (a backend killed with SIGKILL makes the postmaster reinitialise).
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = bulkhead_node('stats');
# the test cluster defaults to off; this test needs the crash restart
$node->append_conf('postgresql.conf', 'restart_after_crash = on');
$node->reload;
$node->safe_psql('postgres',
	"INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)"
	  . " VALUES ('s', 1, 1, '10s'), ('other', 2, 0, '0')");
wait_loaded($node, 's', 1);
wait_loaded($node, 'other', 2);

# --- a wait of about 500 ms -------------------------------------------------
my $holder = session($node);
my $waiter = session($node);
sql($holder, "SELECT bulkhead_acquire('s')");
send_async($waiter,
	"SELECT bulkhead_acquire('s'); SELECT wait_ms FROM bulkhead_activity WHERE pid = pg_backend_pid();");
ok(poll_until($node,
		"SELECT count(*) = 1 FROM bulkhead_activity WHERE workload = 's' AND state = 'queued'"),
	'waiter queued');
select(undef, undef, undef, 0.5);
sql($holder, "SELECT bulkhead_release('s')");
my ($out, $err) = finish_async($waiter);
is($err, '', 'the waiter got its permit');
my ($waited) = $out =~ /([0-9.]+)\s*$/;
ok(defined $waited && $waited >= 500, "the wait took at least 500 ms ($waited ms)");
sql($waiter, "SELECT bulkhead_release('s')");

my ($p50, $p95, $p99, $max, $total) = split /\|/,
  $node->safe_psql('postgres',
	"SELECT wait_p50_ms, wait_p95_ms, wait_p99_ms, wait_time_max_ms, wait_time_total_ms"
	  . " FROM bulkhead_stats WHERE workload = 's'");
# two waits: the holder's immediate grant (0) and the waiter's
ok(abs($p99 - $waited) <= 0.10 * $waited,
	"p99 ($p99 ms) within 10% of the measured wait ($waited ms)");
ok(abs($p95 - $waited) <= 0.10 * $waited, "p95 ($p95 ms) too");
ok(abs($max - $waited) <= 0.01 * $waited + 1, "max ($max ms) is the wait");
ok($p50 < 0.01, "p50 ($p50 ms) is the immediate grant");
ok(abs($total - $max) < 0.01, "the total is the one wait ($total ms)");
close_session($_) for ($holder, $waiter);

# --- a clean restart keeps the figures ----------------------------------------
$node->safe_psql('postgres', "SELECT bulkhead_try_acquire('other'), bulkhead_release('other')");
$node->safe_psql('postgres', "SELECT bulkhead_try_acquire('s'), bulkhead_release('s')");
my $figures =
  "SELECT workload, acquired, released, peak_running, peak_queued,"
  . " round(wait_time_max_ms), stats_reset"
  . " FROM bulkhead_stats ORDER BY workload";
my $before = $node->safe_psql('postgres', $figures);
like($before, qr/^other\|1\|1\|1\|0\|0\|.*\ns\|3\|3\|1\|1\|\d+\|/,
	'figures before the restart');

$node->restart;
wait_loaded($node, 's', 1);
is($node->safe_psql('postgres', $figures), $before,
	'a clean restart keeps every figure, stats_reset included');
is($node->safe_psql('postgres',
		"SELECT running, queued FROM bulkhead_stats WHERE workload = 's'"),
	'0|0', 'current state starts empty');
ok(!-e $node->data_dir . '/pg_stat/bulkhead.stat',
	'the file is removed once read back');

# --- a workload deleted while the server is down loses its figures -----------
$node->stop;
$node->start;
wait_loaded($node, 's', 1);
$node->safe_psql('postgres', "DELETE FROM bulkhead_workload WHERE name = 'other'");
ok(poll_until($node, "SELECT count(*) = 1 FROM bulkhead_stats"), "'other' is gone");
$node->restart;
wait_loaded($node, 's', 1);
$node->safe_psql('postgres', "INSERT INTO bulkhead_workload (name, max_running) VALUES ('other', 2)");
wait_loaded($node, 'other', 2);
is($node->safe_psql('postgres', "SELECT acquired FROM bulkhead_stats WHERE workload = 'other'"),
	'0', 're-created after its deletion, it starts from zero');

# --- a crash discards them ----------------------------------------------------
is($node->safe_psql('postgres', "SELECT acquired FROM bulkhead_stats WHERE workload = 's'"),
	'3', "'s' still has its figures before the crash");
my $victim = session($node);
my $victim_pid = sql($victim, 'SELECT pg_backend_pid()');
kill 'KILL', $victim_pid;
close_session($victim);
ok( poll_until(
		$node,
		"SELECT count(*) = 2 FROM bulkhead_stats WHERE acquired = 0 AND released = 0",
		60),
	'after the crash restart the workloads are back with zeroed figures');
ok($node->log_contains('all server processes terminated; reinitializing'),
	'the server went through a crash restart');

# and a clean shutdown after the crash saves only what came after it
$node->safe_psql('postgres', "SELECT bulkhead_try_acquire('s'), bulkhead_release('s')");
$node->restart;
wait_loaded($node, 's', 1);
is($node->safe_psql('postgres', "SELECT acquired FROM bulkhead_stats WHERE workload = 's'"),
	'1', 'what was counted after the crash survives the next clean restart');

$node->stop;
done_testing();
