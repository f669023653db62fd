# 100_adaptive.pl: the adaptive limit under real load.  Workload hot
# (adaptive, min_running 2, max_running 16) is driven by pgbench clients
# that take its permit in each transaction; a monitor session samples
# bulkhead_stats meanwhile.
#
#  1. Holders that block each other on one hot row (an UPDATE of one row
#     while holding the permit) drive the "holders" law down: the limit goes
#     below 16 and stays within [2, 16]; the change is logged at LOG with
#     its figures.
#  2. At rest (no caller waits) the worker keeps the limit.  Terminated, the
#     worker comes back after 5 s (bgw_restart_time) and the limit in force
#     is the same (it lives in shared memory; only the law's own figures
#     start afresh), also through a load of the table.
#  3. The restarted worker keeps adapting: holders that do not block each
#     other (pg_sleep) raise the limit.  A manual UPDATE of max_running
#     below the limit in force puts the limit at or under it as soon as the
#     worker has loaded it, and it stays there under load; running falls
#     under it as holders finish (no preemption).
#  4. An UPDATE of an adaptive workload at rest keeps its limit (clamped
#     into the new bounds); adaptive = false makes the limit max_running.
#  5. A light load (2 clients on adaptive light: min_running 1,
#     max_running 8) is never throttled: the limit never goes under 2.
#  6. A burst of holders that do not block each other, after a rest,
#     keeps the limit at max_running (the windows at rest, where nobody
#     waited, do not count in the estimate).
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

my $node = bulkhead_node('adaptive');
$node->safe_psql(
	'postgres', q{
	CREATE TABLE hot_row (id int PRIMARY KEY, n bigint NOT NULL);
	INSERT INTO hot_row VALUES (1, 0);
	INSERT INTO bulkhead_workload
	    (name, max_running, min_running, adaptive, max_queued, queue_timeout)
	VALUES ('hot', 16, 16, true, 1000, '60s'),
	       ('light', 8, 8, true, 1000, '60s');
});
wait_loaded($node, 'hot', 16);
wait_loaded($node, 'light', 8);

# A workload that becomes adaptive starts at twice the server's CPUs,
# within its bounds.  To start the tests at max_running whatever the CPU
# count, the workloads are created with min_running = max_running, and
# min_running is then lowered: an UPDATE keeps the limit in force.
sub lower_min_running
{
	my ($w, $min) = @_;
	$node->safe_psql('postgres',
		"UPDATE bulkhead_workload SET min_running = $min, max_queued = 997 WHERE name = '$w'");
	ok( poll_until(
			$node,
			"SELECT max_queued = 997 AND current_limit = max_running"
			  . " FROM bulkhead_stats WHERE workload = '$w'"),
		"$w: min_running lowered to $min, the limit stays at max_running");
}
lower_min_running('hot', 2);
lower_min_running('light', 1);

my $mon = session($node);

# max_running|current_limit|running|queued of workload $w, as a hashref
sub figures
{
	my ($w) = @_;
	my $row = sql($mon,
		"SELECT max_running || '|' || current_limit || '|' || running || '|' || queued"
		  . " FROM bulkhead_stats WHERE workload = '$w'");
	my %f;
	@f{qw(max limit running queued)} = split /\|/, $row;
	die "no figures for workload $w: $row" unless defined $f{queued};
	return \%f;
}

is(figures('hot')->{limit}, 16, 'an adaptive workload starts at max_running');

# pgbench with script $body, $clients clients for $secs seconds, started in
# the background
sub start_pgbench
{
	my ($name, $body, $clients, $secs) = @_;
	my $script = $node->basedir . "/$name.sql";
	PostgreSQL::Test::Utils::append_to_file($script, $body) unless -e $script;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[
			'pgbench', '-n', '-c', $clients, '-j', 2, '-T', $secs,
			'-f', $script, '-h', $node->host, '-p', $node->port, 'postgres'
		],
		'>', \$out, '2>', \$err);
	return { h => $h, out => \$out, err => \$err, name => $name };
}

# Wait for pgbench to end; check that every transaction went through
sub finish_pgbench
{
	my ($p) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $ok = $p->{h}->finish;
	ok($ok, "pgbench $p->{name} ran") or diag ${ $p->{err} };
	like(${ $p->{out} }, qr/number of failed transactions: 0 /,
		"pgbench $p->{name}: no transaction failed");
	return;
}

# Sample workload $w every 20 ms while pgbench $p runs (at most $secs
# seconds), until $until->(figures) is true if given.  Returns the samples.
sub sample
{
	my ($p, $w, $secs, $until) = @_;
	my @s;
	my $deadline = time() + $secs;
	while (time() < $deadline)
	{
		push @s, figures($w);
		last if $until && $until->($s[-1]);
		$p->{h}->pump_nb;
		last unless $p->{h}->pumpable;
		usleep(20_000);
	}
	return @s;
}

sub limits
{
	return map { $_->{limit} } @_;
}

sub minmax
{
	my @v = sort { $a <=> $b } @_;
	return ($v[0], $v[-1]);
}

#
# 1. Hot row: the holders block each other, the limit goes down
#
my $log_offset = -s $node->logfile;
my $p = start_pgbench('hot_row', <<'EOF', 24, 5);
BEGIN;
SELECT bulkhead_acquire_xact('hot');
UPDATE hot_row SET n = n + 1 WHERE id = 1;
SELECT pg_sleep(0.005);
END;
EOF
my @s = sample($p, 'hot', 10);
finish_pgbench($p);
my ($lo, $hi) = minmax(limits(@s));
diag sprintf('hot row: %d samples, limit %d to %d, peak queued %d',
	scalar(@s), $lo, $hi, (minmax(map { $_->{queued} } @s))[1]);
cmp_ok(scalar(@s), '>', 50, 'samples taken under the hot-row load');
ok($lo >= 2 && $hi <= 16,
	"current_limit within [min_running 2, max_running 16] in every sample ($lo to $hi)");
cmp_ok($lo, '<', 16, 'the hot-row load drives the limit below max_running');
ok((grep { $_->{queued} > 0 } @s), 'callers queued (the limit was binding)');
is($node->safe_psql('postgres',
		"SELECT peak_running <= 16 FROM bulkhead_stats WHERE workload = 'hot'"),
	't', 'peak_running never exceeded max_running');

my $log = slurp_file($node->logfile, $log_offset);
my @changes = $log =~
  /bulkhead: workload "hot": adaptive limit changed from (\d+) to (\d+)\n[^\n]*DETAIL:  Holders per sample: [^\n]*bounds \[2, 16\]\./g;
ok(@changes >= 2, 'a large change of the limit is logged at LOG, with a DETAIL of its figures')
  or diag($log);
my @bad;
while (my ($from, $to) = splice(@changes, 0, 2))
{
	push @bad, "$from -> $to"
	  unless $to >= 2 && $to <= 16
	  && ($to > 2 * $from || 2 * $to < $from || $to == 2 || $to == 16);
}
is("@bad", '', 'every logged change is by more than x2 or reaches a bound, within [2, 16]');
# the drop from 16 is logged: in one step, or (when the first window caught
# the load's start, and the first step was less than x2) from 8 or more
my ($first_from) =
  $log =~ /LOG:  bulkhead: workload "hot": adaptive limit changed from (\d+) to \d+/;
cmp_ok($first_from // 0, '>=', 8,
	'the drop from max_running is logged (the first logged change starts from 8 to 16)');

#
# 2. At rest the limit is kept, and a worker restart keeps it
#
usleep(500_000);    # past the decision whose window saw the load's end
my $rest = figures('hot');
my $limit = $rest->{limit};
cmp_ok($limit, '<', 16, "at rest after the load: limit $limit");
diag "at rest after the hot-row load, and across the worker restart: limit $limit";
is($rest->{running} + $rest->{queued}, 0, 'nothing running or queued');
usleep(1_000_000);
is(figures('hot')->{limit}, $limit, 'one second at rest later, the limit is the same');

my $old = worker_pid($node);
like($old, qr/^\d+$/, 'one bulkhead worker runs');
is($node->safe_psql('postgres', "SELECT pg_terminate_backend($old)"),
	't', 'worker terminated');
ok( poll_until(
		$node, qq{
		SELECT count(*) = 1 FROM pg_stat_activity
		WHERE backend_type = 'bulkhead' AND pid <> $old}, 20),
	'the postmaster starts a new worker');
# it loads the table as it starts; give it time for that and some ticks
usleep(1_000_000);
is(figures('hot')->{limit}, $limit, 'after the restart the limit in force is the same');
$node->safe_psql('postgres',
	"UPDATE bulkhead_workload SET max_queued = 999 WHERE name = 'hot'");
ok( poll_until(
		$node,
		"SELECT max_queued = 999 FROM bulkhead_stats WHERE workload = 'hot'"),
	'the new worker loads a change');
is(figures('hot')->{limit}, $limit, 'and the limit is still the same');

#
# 3. The restarted worker adapts: holders that do not block each other
#    raise the limit; a manual UPDATE below it lowers it at once
#
$p = start_pgbench('sleep', <<'EOF', 24, 16);
BEGIN;
SELECT bulkhead_acquire_xact('hot');
SELECT pg_sleep(0.02);
END;
EOF
my $target = $limit + 2 > 4 ? $limit + 2 : 4;
@s = sample($p, 'hot', 11, sub { $_[0]{limit} >= $target });
($lo, $hi) = minmax(limits(@s));
diag sprintf('sleep load: limit %d to %d over %d samples', $lo, $hi, scalar(@s));
cmp_ok($hi, '>=', $target,
	"the restarted worker raises the limit from $limit to $target or more");
ok($lo >= 2 && $hi <= 16, "current_limit within [2, 16] ($lo to $hi)");

my $n = 3;
$node->safe_psql('postgres',
	"UPDATE bulkhead_workload SET max_running = $n WHERE name = 'hot'");
my $loaded;
@s = sample($p, 'hot', 10, sub { $_[0]{max} == $n });
$loaded = $s[-1];
is($loaded->{max}, $n, "UPDATE max_running = $n under load is loaded");
ok($loaded->{limit} <= $n && $loaded->{limit} >= 2,
	"as soon as it is, current_limit is at most $n ($loaded->{limit})");
# the load goes on: the limit stays within the new bounds, and running
# comes down under it as holders release
@s = sample($p, 'hot', 2);
($lo, $hi) = minmax(limits(@s));
ok(@s > 10 && $lo >= 2 && $hi <= $n,
	"under load afterwards, current_limit stays within [2, $n] ($lo to $hi, "
	  . scalar(@s) . ' samples)');
my @over = grep { $_->{running} > $_->{limit} } (@s > 5 ? @s[ 5 .. $#s ] : ());
is(scalar(@over), 0, 'running is under the lowered limit once holders have finished');
finish_pgbench($p);

#
# 4. At rest: an UPDATE keeps the limit, clamped; adaptive off restores
#    max_running as the limit
#
usleep(500_000);
$rest = figures('hot');
ok($rest->{limit} >= 2 && $rest->{limit} <= $n, "at rest, limit $rest->{limit}");
$limit = $rest->{limit};
$node->safe_psql('postgres',
	"UPDATE bulkhead_workload SET max_running = 12 WHERE name = 'hot'");
ok( poll_until(
		$node,
		"SELECT max_running = 12 FROM bulkhead_stats WHERE workload = 'hot'"),
	'max_running = 12 loaded');
is(figures('hot')->{limit}, $limit,
	'a higher max_running at rest keeps the adaptive limit');
$node->safe_psql('postgres',
	"UPDATE bulkhead_workload SET adaptive = false, max_queued = 998 WHERE name = 'hot'");
ok( poll_until(
		$node,
		"SELECT max_queued = 998 FROM bulkhead_stats WHERE workload = 'hot'"),
	'adaptive = false loaded');
is(figures('hot')->{limit}, 12, 'with adaptive off the limit is max_running');

#
# 5. A light load is not throttled
#
$p = start_pgbench('light', <<'EOF', 2, 3);
BEGIN;
SELECT bulkhead_acquire_xact('light');
SELECT pg_sleep(0.005);
END;
EOF
@s = sample($p, 'light', 10);
finish_pgbench($p);
($lo, $hi) = minmax(limits(@s));
cmp_ok(scalar(@s), '>', 50, 'samples taken under the light load');
cmp_ok($lo, '>=', 2, "2 clients: current_limit never under 2 ($lo to $hi)");
is(figures('light')->{limit}, 8, 'nobody waited: the limit is still max_running');
is($node->safe_psql('postgres',
		"SELECT acquired > 0 AND acquired = released FROM bulkhead_stats WHERE workload = 'light'"),
	't', 'the light load took and returned permits');

#
# 6. A workload at rest whose
#    holders then do not block each other (24 clients in pg_sleep, more
#    than max_running) has no reason to lower its limit below max_running.
#
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload
	    (name, max_running, min_running, adaptive, max_queued, queue_timeout)
	VALUES ('burst', 16, 16, true, 1000, '60s');
});
wait_loaded($node, 'burst', 16);
lower_min_running('burst', 1);
usleep(1_500_000);    # at rest: the worker samples it, nobody waits
$log_offset = -s $node->logfile;
$p = start_pgbench('burst', <<'EOF', 24, 3);
BEGIN;
SELECT bulkhead_acquire_xact('burst');
SELECT pg_sleep(0.02);
END;
EOF
@s = sample($p, 'burst', 10);
finish_pgbench($p);
($lo, $hi) = minmax(limits(@s));
diag "burst after rest: limit $lo to $hi over " . scalar(@s) . ' samples';
($log) = slurp_file($node->logfile, $log_offset) =~
  /(LOG:  bulkhead: workload "burst": adaptive limit changed[^\n]*\n[^\n]*DETAIL:[^\n]*)/;
diag "burst: first logged change: $log" if defined $log;
is($lo, 16, 'holders not blocked by each other keep the limit at max_running');

ok(!$node->log_contains('left by ended processes'),
	'the worker freed no permit of a live backend');
close_session($mon);
$node->stop;
done_testing();
