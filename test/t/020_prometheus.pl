# 020_prometheus.pl: monitoring/prometheus/bulkhead-queries.yaml with the
# real prometheus-postgres-exporter (Debian's package): after a scripted
# sequence with known outcomes, its /metrics shows the bulkhead metrics with
# the right types and values.
#
# The exporter is required: when it is missing the test fails (it does not
# skip), saying what to install.  scripts/test.sh installs it.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use HTTP::Tiny;
use POSIX qw(WNOHANG);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);
use BulkheadTest;
use PromTest;

my $exporter = '/usr/bin/prometheus-postgres-exporter';
my $queries =
  "$FindBin::RealBin/../../monitoring/prometheus/bulkhead-queries.yaml";

if (!-x $exporter)
{
	fail("$exporter not found: install the Debian package"
		  . " prometheus-postgres-exporter (apt-get install"
		  . " prometheus-postgres-exporter; scripts/test.sh does it)");
	done_testing();
	exit 1;
}
ok(-r $queries, "query file $queries exists");

# The exporter's pid while it runs; an END block stops it whatever happens.
my $exporter_pid;

sub stop_exporter
{
	return 1 unless $exporter_pid;
	kill 'TERM', $exporter_pid;
	my $deadline = time() + 10;
	while (time() < $deadline)
	{
		if (waitpid($exporter_pid, WNOHANG) == $exporter_pid)
		{
			$exporter_pid = undef;
			return 1;
		}
		usleep(50_000);
	}
	kill 'KILL', $exporter_pid;
	waitpid($exporter_pid, 0);
	$exporter_pid = undef;
	return 0;
}

END
{
	local $?;
	stop_exporter();
}

my $node = bulkhead_node('prometheus', memory_request => 'limit');
$node->safe_psql(
	'postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, mode)
	VALUES ('w', 1, 0, '0', 'enforce'),
	       ('sh', 1, 1, '0', 'shadow');
	});
wait_loaded($node, 'w', 1);
wait_loaded($node, 'sh', 1);

# An adaptive workload whose limit in force is not its max_running: at rest
# (nobody waits, so the worker leaves it alone) an UPDATE keeps the limit,
# moved into the new bounds: max_running 4 -> 2 lowers it to 2, 2 -> 6 keeps
# it at 2.
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, min_running, adaptive)
	VALUES ('ad', 4, 1, true);
	});
wait_loaded($node, 'ad', 4);
$node->safe_psql('postgres',
	"UPDATE bulkhead_workload SET max_running = 2 WHERE name = 'ad'");
wait_loaded($node, 'ad', 2);
$node->safe_psql('postgres',
	"UPDATE bulkhead_workload SET max_running = 6 WHERE name = 'ad'");
wait_loaded($node, 'ad', 6);
is($node->safe_psql('postgres',
		"SELECT current_limit FROM bulkhead_stats WHERE workload = 'ad'"),
	'2', 'adaptive workload ad: max_running 6, limit in force 2');

my ($sa, $sb, $sc) = (session($node), session($node), session($node));
my $pid_b = sql($sb, 'SELECT pg_backend_pid()');
sql($_, '\\set VERBOSITY verbose') for ($sa, $sb, $sc);    # SQLSTATEs in errors

sub check_sql
{
	my ($s, $query, $expected_err, $name) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my ($out, $err) = sql2($s, $query);
	if (defined $expected_err)
	{
		like($err, $expected_err, $name);
	}
	else
	{
		is($err, '', $name);
	}
	return $out;
}

#
# Shadow workload 'sh' (B=1, Q=1): three acquires all run; enforce mode
# would have queued the second and rejected the third.
#
check_sql($_, "SELECT bulkhead_acquire('sh')", undef, 'shadow acquire')
  for ($sa, $sb, $sc);
check_sql($_, "SELECT bulkhead_release('sh')", undef, 'shadow release')
  for ($sa, $sb, $sc);

#
# Enforce workload 'w' (B=1, Q=0, queue_timeout 0).
#
check_sql($sa, "SELECT bulkhead_acquire('w'); SELECT bulkhead_release('w')",
	undef, 'A: acquire and release');
check_sql($sa,
	"SELECT bulkhead_acquire('w'); SELECT pg_sleep(0.2); SELECT bulkhead_release('w')",
	undef, 'A: acquire, hold 0.2 s, release');
check_sql($sa, "SELECT bulkhead_acquire('w')", undef, 'A: acquire and hold');
is(check_sql($sb, "SELECT bulkhead_try_acquire('w')", undef, 'B: try_acquire'),
	'f', 'B: try_acquire refused while A holds (Q=0: rejected_full)');
check_sql($sb, "SELECT bulkhead_acquire('w')", qr/53B01/,
	'B: acquire rejected at once (53B01)');

# Q=1: a wait is possible now
$node->safe_psql('postgres',
	"UPDATE bulkhead_workload SET max_queued = 1 WHERE name = 'w'");
ok( poll_until(
		$node,
		"SELECT max_queued = 1 FROM bulkhead_stats WHERE workload = 'w'"),
	'max_queued = 1 loaded');

check_sql($sb, "SELECT bulkhead_acquire('w', '100ms')", qr/53B02/,
	'B: 100 ms wait times out (53B02)');

# a wait ended by a cancel
send_async($sb, "SELECT bulkhead_acquire('w', '60s');");
ok( poll_until(
		$node,
		"SELECT count(*) = 1 FROM bulkhead_activity"
		  . " WHERE workload = 'w' AND state = 'queued'"),
	'B queued');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid_b)");
my ($out, $err) = finish_async($sb);
like($err, qr/57014/, 'B: wait cancelled (57014)');

# a wait of at least 0.3 s that ends with a permit
send_async($sb, "SELECT bulkhead_acquire('w', '60s');");
ok( poll_until(
		$node,
		"SELECT count(*) = 1 FROM bulkhead_activity"
		  . " WHERE workload = 'w' AND state = 'queued'"),
	'B queued again');
usleep(300_000);
check_sql($sa, "SELECT bulkhead_release('w')", undef, 'A: release');
($out, $err) = finish_async($sb);
is($err, '', 'B: got the permit after waiting');

# final state: B runs, C waits
send_async($sc, "SELECT bulkhead_acquire('w', '60s');");
ok( poll_until(
		$node,
		"SELECT count(*) = 1 FROM bulkhead_activity"
		  . " WHERE workload = 'w' AND state = 'queued'"),
	'C queued behind B');

is( $node->safe_psql(
		'postgres', q{
		SELECT mode, max_running, max_queued, running, queued, acquired,
		       rejected_full, timed_out, cancelled, released, shadow_queued,
		       shadow_rejected, peak_running, peak_queued
		  FROM bulkhead_stats WHERE workload IN ('w', 'sh') ORDER BY workload}),
	"shadow|1|1|0|0|3|0|0|0|3|1|1|3|0\n"
	  . "enforce|1|1|1|1|4|2|1|1|3|0|0|1|1",
	'bulkhead_stats after the sequence');

# A budget b (2 permits) whose child bc (reserved 0, weight 300) borrows
# the one permit A holds of it
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running) VALUES ('b', 2);
	INSERT INTO bulkhead_workload (name, max_running, parent, reserved, weight)
	VALUES ('bc', 2, 'b', 0, 300);
	});
ok(poll_until($node,
		"SELECT parent = 'b' FROM bulkhead_stats WHERE workload = 'bc'"),
	'budget b and its child bc loaded');
check_sql($sa, "SELECT bulkhead_acquire('bc')", undef, 'A: acquire bc');
is($node->safe_psql('postgres',
		"SELECT running, borrowed FROM bulkhead_stats WHERE workload = 'bc'"),
	'1|1', 'bc borrows one permit of b');

# Memory grants (1.4): m1 and m2 have a max_memory ('700MB', and a plain
# number, which is in kB), the other workloads none, so no
# bulkhead_max_memory_bytes series; the server's bound bulkhead.max_memory is
# on for the first scrape and turned off for a second one. No statement of
# theirs runs and nothing waits for memory: the figures are those at rest.
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_memory)
	VALUES ('m1', 1, '700MB'), ('m2', 1, '65536');
	});
wait_loaded($node, 'm1', 1);
wait_loaded($node, 'm2', 1);
# Grant feedback (1.5): m3's statement (string_agg, query identifiers on)
# runs twice, so its notes give one row of bulkhead_grant_feedback_*.
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_memory) VALUES ('m3', 1, '100MB');
	ALTER SYSTEM SET compute_query_id = on;
	CREATE TABLE feedback_t AS SELECT md5(i::text) AS v FROM generate_series(1, 100000) i;
	});
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
wait_loaded($node, 'm3', 1);
$node->safe_psql('postgres',
	"BEGIN; SELECT bulkhead_acquire_xact('m3');"
	  . " SELECT length(string_agg(v, ',')) FROM feedback_t; COMMIT;")
  for 1 .. 2;
$node->safe_psql('postgres', "ALTER SYSTEM SET bulkhead.max_memory = '1536MB'");
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
ok(poll_until($node, 'SELECT max_memory IS NOT NULL FROM bulkhead_memory'),
	'bulkhead.max_memory 1536MB loaded');

#
# The exporter, on a free loopback port, connected through the node's
# Unix socket.
#
my $user = $node->safe_psql('postgres', 'SELECT current_user');
my $dsn =
	'host=' . $node->host
  . ' port=' . $node->port
  . " user=$user dbname=postgres sslmode=disable";
my $http_port = PostgreSQL::Test::Cluster::get_free_port();
my $exporter_log = "$PostgreSQL::Test::Utils::log_path/020_prometheus_exporter.log";
my @cmd = (
	$exporter,
	"--web.listen-address=127.0.0.1:$http_port",
	"--extend.query-path=$queries",
	'--disable-default-metrics',
	'--disable-settings-metrics',
	'--no-collector.database',
	'--no-collector.bgwriter',
	'--log.level=info');
note "starting: DATA_SOURCE_NAME='$dsn' @cmd (log: $exporter_log)";

$exporter_pid = fork();
die "fork: $!" unless defined $exporter_pid;
if ($exporter_pid == 0)
{
	open(STDIN, '<', '/dev/null') or POSIX::_exit(126);
	open(STDOUT, '>>', $exporter_log) or POSIX::_exit(126);
	open(STDERR, '>&', \*STDOUT) or POSIX::_exit(126);
	$ENV{DATA_SOURCE_NAME} = $dsn;
	exec { $cmd[0] } @cmd or print STDERR "exec $cmd[0]: $!\n";
	# _exit: no END blocks in the child (they would stop the node)
	POSIX::_exit(127);
}

# Scrape until the exporter answers and has reached the node (bounded).
my $url = "http://127.0.0.1:$http_port/metrics";
my $http = HTTP::Tiny->new(timeout => 10);
my ($body, $last) = (undef, '');
my $deadline = time() + 60;
while (time() < $deadline)
{
	if (waitpid($exporter_pid, WNOHANG) == $exporter_pid)
	{
		$last = "exporter exited (status $?)";
		$exporter_pid = undef;
		last;
	}
	my $res = $http->get($url);
	if ($res->{success} && $res->{content} =~ /^pg_up 1$/m)
	{
		$body = $res->{content};
		last;
	}
	$last = "$res->{status} $res->{reason}";
	usleep(200_000);
}
if (!defined $body)
{
	fail("scrape $url: $last");
	diag(slurp_file($exporter_log)) if -f $exporter_log;
	done_testing();
	exit 1;
}
pass("scraped $url");
if ($body !~ /^bulkhead_acquired_total\{/m)
{
	fail('the scrape has the bulkhead metrics');
	diag("exporter log:\n" . slurp_file($exporter_log));
}
# keep what was scraped, next to the other logs
open(my $fh, '>', "$PostgreSQL::Test::Utils::log_path/020_prometheus_metrics.txt")
  or die "write metrics.txt: $!";
print $fh $body;
close($fh);

# samples by name, types by name
my ($samples_ref, $types_ref) = parse_metrics($body);
my %samples = %$samples_ref;
my %types = %$types_ref;

# The value of the one sample of $name whose labels include %want (other
# labels, such as the exporter's "server", may be there too); undef if
# there is none or more than one.
sub sample
{
	my ($name, %want) = @_;
	my @hits = grep {
		my $l = $_->{labels};
		!grep { !defined $l->{$_} || $l->{$_} ne $want{$_} } keys %want
	} @{ $samples{$name} // [] };
	return @hits == 1 ? $hits[0]{value} : undef;
}

sub label_text
{
	my (%l) = @_;
	return '{' . join(',', map { "$_=\"$l{$_}\"" } sort keys %l) . '}';
}

sub metric_is
{
	my ($name, $labels, $expected) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $v = sample($name, %$labels);
	my $what = $name . label_text(%$labels);
	if (!defined $v)
	{
		fail("$what is exported once");
		return;
	}
	# numeric comparison: the exporter writes Go's float formatting
	ok(abs($v - $expected) <= 1e-9 * (abs($expected) > 1 ? abs($expected) : 1),
		"$what = $expected")
	  or diag("got $v");
	return;
}

my %w = (workload => 'w', mode => 'enforce');
my %sh = (workload => 'sh', mode => 'shadow');

is(sample('pg_up'), 1, 'pg_up 1 (the exporter reached the node)');
my @load = @{ $samples{pg_exporter_user_queries_load_error} // [] };
is(scalar(@load), 1, 'one query file loaded');
is($load[0]{value}, 0, 'pg_exporter_user_queries_load_error 0 (the YAML is valid)')
  if @load;
is(sample('pg_exporter_last_scrape_error'),
	0, 'pg_exporter_last_scrape_error 0 (every query ran)');

# types
my %expected_types = (
	(map { ("bulkhead_$_" => 'gauge') }
		  qw(max_running max_queued running queued peak_running peak_queued
		  current_limit config_min_running config_adaptive
		  budget_reserved budget_weight budget_borrowed
		  wait_time_max_seconds stats_reset_timestamp_seconds
		  wait_time_seconds hold_time_seconds activity_backends
		  memory_granted_bytes memory_waiting memory_wait_p99_seconds
		  max_memory_bytes memory_server_granted_bytes memory_server_waiting
		  memory_server_max_bytes grant_feedback_requested_bytes
		  grant_feedback_used_bytes grant_feedback_ratio grant_feedback_at_limit)),
	(map { ("bulkhead_${_}_total" => 'counter') }
		  qw(acquired rejected_full timed_out cancelled released
		  shadow_queued shadow_rejected deadlocks wait_time_seconds
		  hold_time_seconds budget_over_hold budget_moved_out
		  budget_moved_in memory_waits memory_shrunk memory_server_waits
		  memory_server_shrunk priority_boosts priority_boosts_borrowed)));
for my $m (sort keys %expected_types)
{
	is($types{$m}, $expected_types{$m}, "# TYPE $m $expected_types{$m}");
}
my @unexpected = grep { /^bulkhead_/ && !exists $expected_types{$_} }
  sort keys %samples;
is("@unexpected", '', 'no other bulkhead_ metric');

# exact values after the sequence
my %expect_w = (
	max_running => 1,
	current_limit => 1,
	max_queued => 1,
	running => 1,
	queued => 1,
	peak_running => 1,
	peak_queued => 1,
	acquired_total => 4,
	rejected_full_total => 2,
	timed_out_total => 1,
	cancelled_total => 1,
	released_total => 3,
	shadow_queued_total => 0,
	shadow_rejected_total => 0,
	deadlocks_total => 0);
my %expect_sh = (
	%expect_w,
	running => 0,
	queued => 0,
	peak_running => 3,
	peak_queued => 0,    # in shadow mode nobody waits
	acquired_total => 3,
	rejected_full_total => 0,
	timed_out_total => 0,
	cancelled_total => 0,
	released_total => 3,
	shadow_queued_total => 1,
	shadow_rejected_total => 1);
metric_is("bulkhead_$_", \%w, $expect_w{$_}) for sort keys %expect_w;
metric_is("bulkhead_$_", \%sh, $expect_sh{$_}) for sort keys %expect_sh;

# the limit in force, not max_running, for the adaptive workload
my %ad = (workload => 'ad', mode => 'enforce');
metric_is('bulkhead_max_running', \%ad, 6);
metric_is('bulkhead_current_limit', \%ad, 2);

# the bounds from bulkhead_workload (query bulkhead_config): min_running
# and whether the workload is adaptive
metric_is('bulkhead_config_min_running', \%ad, 1);
metric_is('bulkhead_config_adaptive', \%ad, 1);
metric_is('bulkhead_config_min_running', \%w, 1);
metric_is('bulkhead_config_adaptive', \%w, 0);
metric_is('bulkhead_config_adaptive', \%sh, 0);

# the budget query: bc under b, borrowing the one permit A holds
my %bc = (workload => 'bc', mode => 'enforce', parent => 'b');
metric_is('bulkhead_budget_borrowed', \%bc, 1);
metric_is('bulkhead_budget_reserved', \%bc, 0);
metric_is('bulkhead_budget_weight', \%bc, 300);
metric_is('bulkhead_budget_over_hold_total', \%bc, 0);
metric_is('bulkhead_budget_moved_in_total', \%bc, 0);

# activity: one running and one queued on w, zeros on sh
metric_is('bulkhead_activity_backends', { workload => 'w', state => 'running' }, 1);
metric_is('bulkhead_activity_backends', { workload => 'w', state => 'queued' }, 1);
metric_is('bulkhead_activity_backends', { workload => 'sh', state => 'running' }, 0);
metric_is('bulkhead_activity_backends', { workload => 'sh', state => 'queued' }, 0);
# (1.4) a statement waiting for its memory grant has its own state; none now
metric_is('bulkhead_activity_backends', { workload => $_, state => 'waiting for memory' }, 0)
  for qw(w sh m1);

# memory grants (1.4): max_memory in bytes, absent without one
my %m1 = (workload => 'm1', mode => 'enforce');
my %m2 = (workload => 'm2', mode => 'enforce');
metric_is('bulkhead_max_memory_bytes', \%m1, 700 * 1024 * 1024);
metric_is('bulkhead_max_memory_bytes', \%m2, 65536 * 1024);
for my $wl ('w', 'sh', 'ad', 'b', 'bc')
{
	is(scalar(grep { $_->{labels}{workload} eq $wl }
			  @{ $samples{bulkhead_max_memory_bytes} // [] }),
		0, "no bulkhead_max_memory_bytes for $wl (max_memory NULL)");
}
# at rest nothing is granted (a grant ends with its statement, and the one
# statement running in a workload, C's bulkhead_acquire, has no memory node)
# and nothing ever waited for memory
for my $l (\%w, \%sh, \%m1, \%m2)
{
	metric_is("bulkhead_$_", $l, 0)
	  for qw(memory_granted_bytes memory_waiting memory_waits_total
	  memory_shrunk_total);
	my $p99 = $node->safe_psql('postgres',
		"SELECT memory_wait_p99_ms FROM bulkhead_stats WHERE workload = '$l->{workload}'");
	if ($p99 eq '')
	{
		is(sample('bulkhead_memory_wait_p99_seconds', %$l), 'NaN',
			"bulkhead_memory_wait_p99_seconds{workload=\"$l->{workload}\"} NaN (NULL)");
	}
	else
	{
		metric_is('bulkhead_memory_wait_p99_seconds', $l, $p99 / 1000);
	}
}
# grant feedback (1.5): m3's statement asks 1.25x what it used
my %m3 = (workload => 'm3');
ok(sample('bulkhead_grant_feedback_used_bytes', %m3) > 2 * 1024 * 1024,
	'bulkhead_grant_feedback_used_bytes{workload="m3"}: its string_agg measured');
my $ratio = sample('bulkhead_grant_feedback_ratio', %m3);
ok($ratio >= 1 && $ratio <= 1.5, "bulkhead_grant_feedback_ratio{workload=\"m3\"} $ratio, in [1, 1.5]");
metric_is('bulkhead_grant_feedback_at_limit', \%m3, 0);
# lock holders served first (1.5): no lock holder waited, no boost
for my $l (\%w, \%sh, \%m1, \%m2)
{
	metric_is("bulkhead_$_", $l, 0)
	  for qw(priority_boosts_total priority_boosts_borrowed_total);
}
# the server level: bulkhead.max_memory in bytes; nothing waits. What is
# granted may include the exporter's own statement, which reads the view
# while it runs: only bounded here.
metric_is('bulkhead_memory_server_max_bytes', {}, 1536 * 1024 * 1024);
metric_is('bulkhead_memory_server_waiting', {}, 0);
metric_is('bulkhead_memory_server_waits_total', {}, 0);
metric_is('bulkhead_memory_server_shrunk_total', {}, 0);
my $granted = sample('bulkhead_memory_server_granted_bytes');
ok(defined $granted && $granted >= 0 && $granted < 1536 * 1024 * 1024,
	'bulkhead_memory_server_granted_bytes within [0, bulkhead.max_memory)'
	  . (defined $granted ? " ($granted)" : ' (no sample)'));

# durations: the figures of bulkhead_stats, in seconds (they no longer
# change: no wait ends and no permit is released until the scrape is done)
my @cols = qw(wait_time_total_ms wait_time_max_ms hold_time_total_ms
  wait_p50_ms wait_p95_ms wait_p99_ms hold_p50_ms hold_p99_ms);
my %ms;
for my $wl ('w', 'sh')
{
	my @v = split /\|/,
	  $node->safe_psql('postgres',
		    'SELECT '
		  . join(', ', @cols, 'extract(epoch FROM stats_reset)')
		  . " FROM bulkhead_stats WHERE workload = '$wl'");
	@{ $ms{$wl} }{ @cols, 'reset' } = @v;
}
for my $wl ('w', 'sh')
{
	my %l = $wl eq 'w' ? %w : %sh;
	my $m = $ms{$wl};
	metric_is('bulkhead_wait_time_seconds_total', \%l, $m->{wait_time_total_ms} / 1000);
	metric_is('bulkhead_wait_time_max_seconds', \%l, $m->{wait_time_max_ms} / 1000);
	metric_is('bulkhead_hold_time_seconds_total', \%l, $m->{hold_time_total_ms} / 1000);
	metric_is('bulkhead_stats_reset_timestamp_seconds', \%l, $m->{reset});
	metric_is('bulkhead_wait_time_seconds', { %l, quantile => $_ },
		$m->{"wait_p" . ($_ * 100) . "_ms"} / 1000)
	  for qw(0.5 0.95 0.99);
	metric_is('bulkhead_hold_time_seconds', { %l, quantile => $_ },
		$m->{"hold_p" . ($_ * 100) . "_ms"} / 1000)
	  for qw(0.5 0.99);
	is(scalar(grep { $_->{labels}{workload} eq $wl }
			  @{ $samples{bulkhead_wait_time_seconds} }),
		3, "three wait quantiles for $wl");
	is(scalar(grep { $_->{labels}{workload} eq $wl }
			  @{ $samples{bulkhead_hold_time_seconds} }),
		2, "two hold quantiles for $wl");
}

# and those figures make sense: B waited >= 0.3 s, A held >= 0.2 s + more
my $wmax = sample('bulkhead_wait_time_max_seconds', %w);
ok($wmax >= 0.3 && $wmax < 60, "w: longest wait $wmax s is in [0.3, 60)");
ok(sample('bulkhead_wait_time_seconds_total', %w) >= 0.3,
	'w: total wait >= 0.3 s');
ok(sample('bulkhead_wait_time_seconds', %w, quantile => '0.99') >= 0.28,
	'w: wait p99 ~ the 0.3 s wait (within the histogram error)');
ok(sample('bulkhead_hold_time_seconds_total', %w) >= 0.5,
	'w: total hold >= 0.5 s (0.2 s, then the hold during the waits)');
ok(sample('bulkhead_hold_time_seconds', %w, quantile => '0.99') > 0,
	'w: hold p99 > 0');
my $reset = sample('bulkhead_stats_reset_timestamp_seconds', %w);
ok(abs($reset - time()) < 3600, "w: stats_reset $reset is a recent Unix time");

# bulkhead.max_memory off: bulkhead_memory_server_max_bytes disappears from
# the scrapes, the other server-level metrics stay
$node->safe_psql('postgres', 'ALTER SYSTEM RESET bulkhead.max_memory');
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
ok(poll_until($node, 'SELECT max_memory IS NULL FROM bulkhead_memory'),
	'bulkhead.max_memory off again');
my $gone = 0;
$deadline = time() + 30;
while (!$gone && time() < $deadline)
{
	my $res = $http->get($url);
	if ($res->{success})
	{
		my ($s) = parse_metrics($res->{content});
		$gone = !$s->{bulkhead_memory_server_max_bytes}
		  && $s->{bulkhead_memory_server_granted_bytes};
	}
	usleep(200_000) unless $gone;
}
ok($gone, 'bulkhead.max_memory off: no bulkhead_memory_server_max_bytes,'
	  . ' bulkhead_memory_server_granted_bytes still exported');

# the end of the sequence: B releases, C gets its permit
check_sql($sb, "SELECT bulkhead_release('w')", undef, 'B: release');
($out, $err) = finish_async($sc);
is($err, '', 'C: got the permit');
check_sql($sc, "SELECT bulkhead_release('w')", undef, 'C: release');
close_session($_) for ($sa, $sb, $sc);

ok(stop_exporter(), 'exporter stopped by SIGTERM');
$node->stop;

done_testing();
