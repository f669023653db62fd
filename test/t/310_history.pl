# 310_history.pl: bulkhead_history (1.4) across intervals, workloads added,
# dropped, reset and a slot given to another workload, a clean restart
# (kept), a full ring (the oldest overwritten, a shorter ring keeping the
# newest), and a crash (gone).  Intervals of one second; every check polls
# until an interval has ended after what it looks for.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = bulkhead_node('history',
	conf => "bulkhead.history_interval = 1\n"
	  . "bulkhead.history_length = 600\n"
	  . "bulkhead.max_workloads = 4\n"
	  . "restart_after_crash = on\n");
$node->safe_psql('postgres',
	"INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)"
	  . " VALUES ('a', 2, 1, '30s'), ('b', 1, 0, '0')");
wait_loaded($node, 'a', 2);
wait_loaded($node, 'b', 1);

# what a workload's rows add up to (counts summed, peaks at their highest)
sub sums
{
	my ($w) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT coalesce(sum(acquired), 0) || '/' || coalesce(sum(released), 0) || '/'
		       || coalesce(sum(rejected_full), 0) || '/' || coalesce(sum(timed_out), 0) || '/'
		       || coalesce(sum(cancelled), 0) || ' peaks ' || coalesce(max(peak_running), 0)
		       || '/' || coalesce(max(peak_queued), 0)
		  FROM bulkhead_history WHERE workload = '$w'});
}

# poll until workload $w's rows add up to $want
sub sums_are
{
	my ($w, $want, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $got;
	for (1 .. 300)
	{
		$got = sums($w);
		last if $got eq $want;
		select(undef, undef, undef, 0.1);
	}
	is($got, $want, $what);
}

# --- what happens during the intervals ---------------------------------------
# 'a': two holders at once, a third waits, is served, times out nothing;
# 'b': a holder, a caller rejected (53B01), one timed out (no wait allowed)
my @s = map { session($node) } 1 .. 3;
sql($s[0], "SELECT bulkhead_acquire('a')");
sql($s[1], "SELECT bulkhead_acquire('a')");
send_async($s[2], "SELECT bulkhead_acquire('a');");
ok(poll_until($node,
		"SELECT count(*) = 1 FROM bulkhead_activity WHERE workload = 'a' AND state = 'queued'"),
	'a third caller of a waits');
ok(poll_until($node,
		"SELECT EXISTS (SELECT FROM bulkhead_history WHERE workload = 'a' AND peak_queued = 1)"),
	'an interval shows the wait in peak_queued');
sql($s[0], "SELECT bulkhead_release('a')");
my (undef, $err) = finish_async($s[2]);
is($err, '', 'the waiter got its permit');
sql($_, 'SELECT bulkhead_release_all()') for @s[1, 2];
sql($s[0], "SELECT bulkhead_acquire('b')");
like(sql($s[1], "SELECT bulkhead_acquire('b')"), qr/is full/, 'b rejects a caller');
sql($s[0], "SELECT bulkhead_release('b')");
$node->safe_psql('postgres', "UPDATE bulkhead_workload SET max_queued = 1 WHERE name = 'b'");
ok(poll_until($node, "SELECT max_queued = 1 FROM bulkhead_stats WHERE workload = 'b'"),
	'b may queue one');
sql($s[0], "SELECT bulkhead_acquire('b')");
like(sql($s[1], "SELECT bulkhead_acquire('b')"), qr/timed out/,
	'b times a caller out (no wait allowed)');
sql($s[0], "SELECT bulkhead_release('b')");

sums_are('a', '3/3/0/0/0 peaks 2/1', "a's intervals add up to what it did");
sums_are('b', '2/2/1/1/0 peaks 1/0', "b's intervals add up to what it did");
is($node->safe_psql('postgres',
		"SELECT count(*) FROM bulkhead_history WHERE workload = 'a' AND wait_p99_ms >= 0"),
	$node->safe_psql('postgres',
		"SELECT count(*) FROM bulkhead_history WHERE workload = 'a' AND acquired > 0"),
	'a wait percentile in each interval where permits were granted, none elsewhere');
is($node->safe_psql('postgres', q{
		SELECT count(*) FROM bulkhead_history h
		 WHERE interval_end <= interval_start
		    OR EXISTS (SELECT FROM bulkhead_history g
		                WHERE g.interval_start = h.interval_start
		                  AND g.interval_end <> h.interval_end)}),
	'0', 'every interval has one start and one end, the end after the start');
is($node->safe_psql('postgres', q{
		SELECT count(*) FROM (SELECT interval_start, lead(interval_start) OVER w AS next,
		                             interval_end
		                        FROM (SELECT DISTINCT interval_start, interval_end
		                                FROM bulkhead_history) i
		                      WINDOW w AS (ORDER BY interval_start)) x
		 WHERE next IS NOT NULL AND next <> interval_end}),
	'0', 'each interval starts where the one before it ended');

# --- a workload added, one dropped, a slot given to another, a reset -------
$node->safe_psql('postgres', "INSERT INTO bulkhead_workload (name, max_running) VALUES ('c', 1)");
wait_loaded($node, 'c', 1);
sql($s[0], "SELECT bulkhead_acquire('c'), bulkhead_release('c')") for 1 .. 5;
sums_are('c', '5/5/0/0/0 peaks 1/0', 'a workload added counts from zero');

# a reset between two samples: counted from zero again, nothing lost after it
$node->safe_psql('postgres', "SELECT bulkhead_stats_reset('c')");
sql($s[0], "SELECT bulkhead_acquire('c'), bulkhead_release('c')");
sums_are('c', '6/6/0/0/0 peaks 1/0', 'a reset of the statistics between samples');

# 'a' dropped: it keeps its rows, gets none after; its slot goes to 'd'
# (four slots: a, b, c taken, then a's freed), which counts from zero
$node->safe_psql('postgres', "DELETE FROM bulkhead_workload WHERE name = 'a'");
ok(poll_until($node, "SELECT count(*) = 0 FROM bulkhead_stats WHERE workload = 'a'"), 'a is gone');
my $a_end = $node->safe_psql('postgres',
	"SELECT max(interval_end) FROM bulkhead_history WHERE workload = 'a'");
$node->safe_psql('postgres', "INSERT INTO bulkhead_workload (name, max_running) VALUES ('d', 1), ('e', 1)");
wait_loaded($node, 'd', 1);
wait_loaded($node, 'e', 1);
sql($s[0], "SELECT bulkhead_acquire('d'), bulkhead_release('d')");
sums_are('d', '1/1/0/0/0 peaks 1/0', "a workload in a slot given to it counts from zero");
ok(poll_until($node,
		"SELECT count(*) >= 2 FROM bulkhead_history WHERE workload = 'd' AND interval_start >= '$a_end'"),
	'intervals go on after the drop');
is(sums('a'), '3/3/0/0/0 peaks 2/1', "the dropped workload's rows are kept as they were");
is($node->safe_psql('postgres',
		"SELECT count(*) FROM bulkhead_history WHERE workload = 'a' AND interval_end > '$a_end'"),
	'0', 'and it has none after its drop');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM bulkhead_history WHERE workload NOT IN ('a', 'b', 'c', 'd', 'e')"),
	'0', 'rows only for workloads that were defined');
close_session($_) for @s;

# --- a clean restart keeps the ring -----------------------------------------
my $rows_sql = "SELECT workload, interval_start, interval_end, acquired, released,"
  . " rejected_full, timed_out, peak_running, peak_queued FROM bulkhead_history";
my $before = $node->safe_psql('postgres', "$rows_sql ORDER BY 2, 1");
my $nbefore = $node->safe_psql('postgres', "SELECT count(DISTINCT interval_start) FROM bulkhead_history");
cmp_ok($nbefore, '>=', 5, "$nbefore intervals before the restart");
my $last3 = $node->safe_psql('postgres',
	"SELECT string_agg(e::text, ',' ORDER BY e) FROM (SELECT DISTINCT interval_end e FROM bulkhead_history"
	  . " ORDER BY e DESC LIMIT 3) x");
$node->restart;
my $restarted = $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');
# (intervals may end between the read above and the shutdown: those are
# kept too)
my %after = map { $_ => 1 } split /\n/,
  $node->safe_psql('postgres', "$rows_sql WHERE interval_end <= '$restarted' ORDER BY 2, 1");
my @lost = grep { !$after{$_} } split /\n/, $before;
is(join("\n", @lost), '', 'a clean restart keeps every row');
ok(!-e $node->data_dir . '/pg_stat/bulkhead_history.stat', 'the file is removed once read back');
ok(poll_until($node,
		"SELECT count(*) >= 2 FROM bulkhead_history WHERE workload = 'd' AND interval_start > '$restarted'"),
	'new intervals come after the restart');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM bulkhead_history WHERE interval_start < '$restarted' AND interval_end > '$restarted'"),
	'0', 'no interval spans the restart: the first one after it starts at the start');

# --- a shorter ring: the newest intervals kept, then the oldest overwritten --
$node->append_conf('postgresql.conf', "bulkhead.history_length = 3\n");
$last3 = $node->safe_psql('postgres',
	"SELECT string_agg(e::text, ',' ORDER BY e) FROM (SELECT DISTINCT interval_end e FROM bulkhead_history"
	  . " ORDER BY e DESC LIMIT 3) x");
$node->stop;
$node->start;
$restarted = $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');
# (intervals may end between the read above and the shutdown: the kept
# ones are at most 3, none older than the third newest read)
my $third_newest = (split /,/, $last3)[0];
my ($nkept, $older) = split /\|/, $node->safe_psql('postgres',
	"SELECT count(DISTINCT interval_end), count(*) FILTER (WHERE interval_end < '$third_newest')"
	  . " FROM bulkhead_history WHERE interval_end <= '$restarted'");
ok($nkept >= 1 && $nkept <= 3 && $older == 0,
	"a ring of 3 keeps the newest of the saved intervals ($nkept still there)");
ok(poll_until($node,
		"SELECT count(*) = 0 FROM bulkhead_history WHERE interval_end <= '$restarted'", 30),
	'the oldest intervals are overwritten');
ok(poll_until($node, "SELECT count(DISTINCT interval_start) = 3 FROM bulkhead_history"),
	'the ring holds 3 intervals');
my $ring_max = 0;
for (1 .. 20)
{
	my $n = $node->safe_psql('postgres', "SELECT count(DISTINCT interval_start) FROM bulkhead_history");
	$ring_max = $n if $n > $ring_max;
	select(undef, undef, undef, 0.1);
}
is($ring_max, 3, 'never more than 3 intervals');

# --- a crash discards the ring ------------------------------------------------
my $crash_at = $node->safe_psql('postgres', 'SELECT now()');
my $victim = session($node);
my $victim_pid = sql($victim, 'SELECT pg_backend_pid()');
kill 'KILL', $victim_pid;
close_session($victim);
ok(poll_until($node,
		"SELECT EXISTS (SELECT FROM bulkhead_history) AND NOT EXISTS (SELECT FROM bulkhead_history"
		  . " WHERE interval_end <= '$crash_at')", 60),
	'after the crash restart only intervals after the crash are there');
ok($node->log_contains('all server processes terminated; reinitializing'),
	'the server went through a crash restart');
# a clean shutdown after the crash saves only what came after it
$node->restart;
is($node->safe_psql('postgres',
		"SELECT count(*) FROM bulkhead_history WHERE interval_end <= '$crash_at'"),
	'0', 'the next clean restart brings nothing of before the crash back');

$node->stop;
done_testing();
