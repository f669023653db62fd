# 170_budget_weights.pl: over a stretch in which two children of a budget
# stay saturated, each one's share of the budget's permit-time matches its
# weight's share (issue 21): weights 300:100 give 3:1, equal weights 1:1,
# each within +-10%.
#
# Budget root: max_running 4; children a and b, reserved 0, max_running 4.
# Six sessions per child loop for RUN seconds: acquire a permit of their
# child, hold it 20 ms, release it.  With 4 permits and 12 callers both
# children always have waiters.  The permit-time of each child is its
# hold_time_total_ms in bulkhead_stats, read once the loops run and again
# before they stop (so that the start and the end, when the children are
# not both saturated, are left out).

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);
use BulkheadTest;

my $run = 10;        # seconds each loop runs
my $measure = 6;     # seconds measured, from 2 s into the run
my $per_child = 6;

my $node = bulkhead_node('budget_weights');
$node->safe_psql(
	'postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
	VALUES ('root', 4, 0, '60s');
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, parent, weight)
	VALUES ('a', 4, 20, '60s', 'root', 300), ('b', 4, 20, '60s', 'root', 100);
	});
ok( poll_until(
		$node,
		"SELECT count(*) = 2 FROM bulkhead_stats WHERE parent = 'root'"),
	'the budget and its two children are loaded');

my @sessions = map { session($node) } 1 .. 2 * $per_child;

sub hold_ms
{
	my $out = $node->safe_psql('postgres',
		"SELECT string_agg(hold_time_total_ms::text, ',' ORDER BY workload)"
		  . " FROM bulkhead_stats WHERE workload IN ('a', 'b')");
	return split /,/, $out;
}

# Run the loops and return the permit-time (ms) of a and b over the
# measured stretch
sub measure
{
	my ($label) = @_;
	$node->safe_psql('postgres',
		"SELECT bulkhead_stats_reset(w) FROM unnest(ARRAY['root', 'a', 'b']) w");
	for my $i (0 .. $#sessions)
	{
		my $w = $i < $per_child ? 'a' : 'b';
		send_async(
			$sessions[$i], qq{
			DO \$\$
			DECLARE
				deadline timestamptz := clock_timestamp() + interval '$run s';
			BEGIN
				WHILE clock_timestamp() < deadline LOOP
					PERFORM bulkhead_acquire('$w');
					PERFORM pg_sleep(0.02);
					PERFORM bulkhead_release('$w');
				END LOOP;
			END \$\$;});
	}
	sleep(2);
	ok( $node->safe_psql(
			'postgres',
			"SELECT bool_and(queued > 0) FROM bulkhead_stats WHERE workload IN ('a', 'b')"
		) eq 't',
		"$label: both children have waiters");
	my ($a0, $b0) = hold_ms();
	sleep($measure);
	my ($a1, $b1) = hold_ms();
	ok( $node->safe_psql(
			'postgres',
			"SELECT bool_and(queued > 0) FROM bulkhead_stats WHERE workload IN ('a', 'b')"
		) eq 't',
		"$label: both children still have waiters at the end of the stretch");
	for my $s (@sessions)
	{
		my ($out, $err) = finish_async($s);
		is($err, '', "$label: a loop ended without error");
	}
	is( $node->safe_psql(
			'postgres',
			"SELECT string_agg(workload || ':' || running || '/' || queued, ',' ORDER BY workload)"
			  . " FROM bulkhead_stats WHERE workload IN ('root', 'a', 'b')"),
		'a:0/0,b:0/0,root:0/0',
		"$label: nothing held or queued after the loops");
	return ($a1 - $a0, $b1 - $b0);
}

# weights 300:100
my ($a, $b) = measure('3:1');
my $ratio = $b > 0 ? $a / $b : 999;
note sprintf('weights 3:1: a %.0f ms, b %.0f ms, ratio %.3f', $a, $b, $ratio);
cmp_ok($a + $b, '>', 0.8 * 4 * $measure * 1000,
	'3:1: the budget was kept busy (permit-time near 4 permits x the stretch)');
ok($ratio >= 2.7 && $ratio <= 3.3,
	sprintf('3:1: permit-time ratio a/b %.3f within 2.7 .. 3.3', $ratio));

# equal weights
$node->safe_psql('postgres', "UPDATE bulkhead_workload SET weight = 100 WHERE name = 'a'");
ok( poll_until(
		$node, "SELECT weight = 100 FROM bulkhead_stats WHERE workload = 'a'"),
	'weight of a is now 100');
($a, $b) = measure('1:1');
$ratio = $b > 0 ? $a / $b : 999;
note sprintf('weights 1:1: a %.0f ms, b %.0f ms, ratio %.3f', $a, $b, $ratio);
ok($ratio >= 0.9 && $ratio <= 1.1,
	sprintf('1:1: permit-time ratio a/b %.3f within 0.9 .. 1.1', $ratio));

# no debt: a borrows the whole budget alone for 4 s; everyone rests; b
# comes back first, a 0.5 s later; then both saturated share 1:1 at once
sub loops
{
	my ($w, $secs, @ss) = @_;
	for my $s (@ss)
	{
		send_async(
			$s, qq{
			DO \$\$
			DECLARE
				deadline timestamptz := clock_timestamp() + interval '$secs s';
			BEGIN
				WHILE clock_timestamp() < deadline LOOP
					PERFORM bulkhead_acquire('$w');
					PERFORM pg_sleep(0.02);
					PERFORM bulkhead_release('$w');
				END LOOP;
			END \$\$;});
	}
}
my @sa = @sessions[0 .. $per_child - 1];
my @sb = @sessions[$per_child .. $#sessions];
loops('a', 4, @sa);
finish_async($_) for @sa;
sleep(0.5);
loops('b', 9, @sb);
sleep(0.5);
loops('a', 8, @sa);
sleep(1);
my ($a0, $b0) = hold_ms();
sleep(5);
my ($a1, $b1) = hold_ms();
finish_async($_) for @sessions;
($a, $b) = ($a1 - $a0, $b1 - $b0);
$ratio = $b > 0 ? $a / $b : 999;
note sprintf('after a ran alone: a %.0f ms, b %.0f ms, ratio %.3f', $a, $b, $ratio);
ok($ratio >= 0.9 && $ratio <= 1.1,
	sprintf('no debt: a, back after running alone, shares 1:1 with b (ratio %.3f within 0.9 .. 1.1)',
		$ratio));

close_session($_) for @sessions;
$node->stop;
done_testing();
