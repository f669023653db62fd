# 131_adaptive_extension.pl: a holder that waits with wait_event_type
# Extension (here: in the queue of another workload; postgres_fdw and
# dblink show the same class) is not on a CPU.
#
# Workload outer (adaptive, bounds [1, 16]) is driven by 24 pgbench
# clients whose transactions take outer's permit and then inner's; inner
# has one permit, held by another session for 4 s, so outer's holders wait
# in inner's queue, showing bulkhead's own queue event.  They used to count
# as ready to run (as a holder just granted, that still shows that event
# until it runs), at most one per CPU, and the limit fell to about the CPU
# count; they now count as waiting outside the server's CPUs, and the limit
# stays at 16.  (The old behaviour shows only on a machine with fewer than
# about 14 CPUs; the worker logs its count, shown as a diagnostic.)
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = bulkhead_node('adaptive_extension');
$node->safe_psql(
	'postgres', q{
	INSERT INTO bulkhead_workload
	    (name, max_running, min_running, adaptive, max_queued, queue_timeout)
	VALUES ('outer', 16, 16, true, 100, '60s'),
	       ('inner', 1, 1, false, 100, '60s');
});
wait_loaded($node, 'outer', 16);
wait_loaded($node, 'inner', 1);
$node->safe_psql('postgres',
	"UPDATE bulkhead_workload SET min_running = 1, max_queued = 99 WHERE name = 'outer'");
ok( poll_until(
		$node, q{
		SELECT max_queued = 99 AND current_limit = 16
		FROM bulkhead_stats WHERE workload = 'outer'}),
	'outer: min_running lowered to 1, the limit stays at 16');
my ($cpus) = slurp_file($node->logfile) =~ /adaptive limits count (\d+) CPUs/;
diag 'the worker counts ' . ($cpus // '?') . ' CPUs';

my $holder = session($node);
is(sql($holder, "SELECT 'held' FROM bulkhead_acquire('inner')"), 'held',
	"a session holds inner's only permit");

my $script = $node->basedir . '/outer.sql';
PostgreSQL::Test::Utils::append_to_file($script, <<'EOF');
BEGIN;
SELECT bulkhead_acquire_xact('outer');
SELECT bulkhead_acquire_xact('inner');
END;
EOF
my ($out, $err) = ('', '');
my $h = IPC::Run::start(
	[
		'pgbench', '-n', '-c', 24, '-j', 2, '-T', 6,
		'-f', $script, '-h', $node->host, '-p', $node->port, 'postgres'
	],
	'>', \$out, '2>', \$err);

ok( poll_until(
		$node, q{
		SELECT running = 16 AND queued = 8
		FROM bulkhead_stats WHERE workload = 'outer'}, 20),
	"16 holders of outer, 8 callers queued for it");
is( $node->safe_psql(
		'postgres', q{
		SELECT count(*) FROM bulkhead_activity a
		JOIN pg_stat_activity p USING (pid)
		WHERE a.workload = 'outer' AND a.state = 'running'
		  AND p.wait_event_type = 'Extension'}),
	'16',
	"outer's holders show wait_event_type Extension (queued for inner)");

# 4 s of samples while they wait
my $mon = session($node);
my @limits;
my $deadline = time() + 4;
while (time() < $deadline)
{
	push @limits, sql($mon,
		"SELECT current_limit FROM bulkhead_stats WHERE workload = 'outer'");
	$h->pump_nb;
	usleep(20_000);
}
my @sorted = sort { $a <=> $b } @limits;
diag "while outer's holders wait in inner's queue: limit $sorted[0] to $sorted[-1]";
cmp_ok(scalar(@limits), '>', 20, 'samples taken');
is($sorted[0], 16,
	'holders waiting in another queue do not count as on a CPU: the limit stays at 16');

is(sql($holder, "SELECT 'released' FROM bulkhead_release('inner')"),
	'released', 'inner released');
ok($h->finish, 'pgbench ran, no client aborted') or diag $err;
like($out, qr/number of failed transactions: 0 /, 'no transaction failed');

close_session($mon);
close_session($holder);
$node->stop;
done_testing();
