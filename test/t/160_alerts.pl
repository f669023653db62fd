# 160_alerts.pl: monitoring/prometheus/bulkhead-alerts.yaml end to end: the
# real Prometheus (Debian's package) scrapes the real
# prometheus-postgres-exporter running bulkhead-queries.yaml against a node,
# a real overload (four sessions competing for one permit, no queue) makes
# callers fail with 53B01, and BulkheadCallersRejected reaches "firing" in
# Prometheus' HTTP API within a bounded time, for the overloaded workload
# only.
#
# The rules are those of the file, with one change: BulkheadCallersRejected
# holds for 5 s instead of 5 minutes before it fires (the expression and its
# threshold are unchanged), so that the test takes seconds.  Scrapes and
# rule evaluations run every second.  Everything listens on loopback, on
# free ports, and is stopped at the end whatever happens.
#
# Prometheus and the exporter are required: when one is missing the test
# fails (it does not skip), saying what to install.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use HTTP::Tiny;
use JSON::PP;
use POSIX qw(WNOHANG);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);
use BulkheadTest;

my $exporter = '/usr/bin/prometheus-postgres-exporter';
my $prometheus = '/usr/bin/prometheus';
my $mondir = "$FindBin::RealBin/../../monitoring/prometheus";
my $queries = "$mondir/bulkhead-queries.yaml";
my $rules = "$mondir/bulkhead-alerts.yaml";

for my $bin ([ $exporter, 'prometheus-postgres-exporter' ],
	[ $prometheus, 'prometheus' ])
{
	next if -x $bin->[0];
	fail("$bin->[0] not found: install the Debian package $bin->[1]"
		  . " (apt-get install $bin->[1])");
	done_testing();
	exit 1;
}
ok(-r $queries && -r $rules, 'query and rule files exist');

# Child processes (exporter, prometheus): name => pid. An END block stops
# them whatever happens.
my %pids;

sub start_child
{
	my ($name, $log, $env, @cmd) = @_;
	note "starting $name: @cmd (log: $log)";
	my $pid = fork();
	die "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		open(STDIN, '<', '/dev/null') or POSIX::_exit(126);
		open(STDOUT, '>>', $log) or POSIX::_exit(126);
		open(STDERR, '>&', \*STDOUT) or POSIX::_exit(126);
		$ENV{$_} = $env->{$_} for keys %$env;
		exec { $cmd[0] } @cmd or print STDERR "exec $cmd[0]: $!\n";
		# _exit: no END blocks in the child (they would stop the node)
		POSIX::_exit(127);
	}
	$pids{$name} = $pid;
	return;
}

sub stop_child
{
	my ($name) = @_;
	my $pid = delete $pids{$name};
	return 1 unless $pid;
	kill 'TERM', $pid;
	my $deadline = time() + 20;
	while (time() < $deadline)
	{
		return 1 if waitpid($pid, WNOHANG) == $pid;
		usleep(50_000);
	}
	kill 'KILL', $pid;
	waitpid($pid, 0);
	return 0;
}

END
{
	local $?;
	stop_child($_) for keys %pids;
}

my $logdir = $PostgreSQL::Test::Utils::log_path;
my $tmp = PostgreSQL::Test::Utils::tempdir('alerts');

my $node = bulkhead_node('alerts');
# 'w': one permit, no queue: every caller that finds the permit taken is
# rejected at once (53B01). 'calm': never overloaded, must not alert.
$node->safe_psql(
	'postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued)
	VALUES ('w', 1, 0), ('calm', 4, 4);
	});
wait_loaded($node, 'w', 1);
wait_loaded($node, 'calm', 4);

#
# The exporter, as in 020_prometheus.pl.
#
my $user = $node->safe_psql('postgres', 'SELECT current_user');
my $dsn =
	'host=' . $node->host
  . ' port=' . $node->port
  . " user=$user dbname=postgres sslmode=disable";
my $exporter_port = PostgreSQL::Test::Cluster::get_free_port();
start_child(
	'exporter', "$logdir/160_alerts_exporter.log",
	{ DATA_SOURCE_NAME => $dsn },
	$exporter,
	"--web.listen-address=127.0.0.1:$exporter_port",
	"--extend.query-path=$queries",
	'--disable-default-metrics',
	'--disable-settings-metrics',
	'--no-collector.database',
	'--no-collector.bgwriter',
	'--log.level=info');

#
# Prometheus: the rules file with BulkheadCallersRejected's "for" shortened
# to 5 s, a scrape of the exporter and an evaluation every second.
#
open(my $in, '<', $rules) or die "read $rules: $!";
my $text = do { local $/; <$in> };
close($in);
my $n = ($text =~
	  s/(- alert: BulkheadCallersRejected\n(?:[ \t]+[^\n]*\n)*?[ \t]+for:[ \t]*)5m\n/${1}5s\n/
);
is($n, 1, 'BulkheadCallersRejected found in the rules, "for: 5m" set to 5s');
my $test_rules = "$tmp/bulkhead-alerts.yaml";
open(my $out, '>', $test_rules) or die "write $test_rules: $!";
print $out $text;
close($out);

my $prom_port = PostgreSQL::Test::Cluster::get_free_port();
my $config = "$tmp/prometheus.yml";
open($out, '>', $config) or die "write $config: $!";
print $out <<"EOF";
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - $test_rules
scrape_configs:
  - job_name: postgres
    static_configs:
      - targets: ['127.0.0.1:$exporter_port']
EOF
close($out);
mkdir("$tmp/tsdb") or die "mkdir: $!";
start_child(
	'prometheus', "$logdir/160_alerts_prometheus.log",
	{},
	$prometheus,
	"--config.file=$config",
	"--storage.tsdb.path=$tmp/tsdb",
	"--web.listen-address=127.0.0.1:$prom_port",
	'--log.level=info');

my $http = HTTP::Tiny->new(timeout => 10);
my $api = "http://127.0.0.1:$prom_port/api/v1";

# GET $api/$path; the decoded "data" of a successful answer, or undef.
sub api
{
	my ($path) = @_;
	my $res = $http->get("$api/$path");
	return undef unless $res->{success};
	my $doc = eval { decode_json($res->{content}) };
	return undef unless $doc && ($doc->{status} // '') eq 'success';
	return $doc->{data};
}

# Poll $cond (a sub returning true when done) every 0.5 s for up to
# $seconds; true if it came true.
sub wait_for
{
	my ($seconds, $cond) = @_;
	my $deadline = time() + $seconds;
	while (time() < $deadline)
	{
		for my $name (keys %pids)
		{
			if (waitpid($pids{$name}, WNOHANG) == $pids{$name})
			{
				diag("$name exited (status $?)");
				delete $pids{$name};
				return 0;
			}
		}
		return 1 if $cond->();
		usleep(500_000);
	}
	return 0;
}

# The instant value of a PromQL expression as a list of [labels, value].
sub query
{
	my ($expr) = @_;
	my $q = $expr;
	$q =~ s/([^A-Za-z0-9_.~-])/sprintf('%%%02X', ord($1))/ge;
	my $data = api("query?query=$q");
	return () unless $data && $data->{resultType} eq 'vector';
	return map { [ $_->{metric}, $_->{value}[1] ] } @{ $data->{result} };
}

# The alerts Prometheus has now: [name, workload, state]
sub alerts
{
	my $data = api('alerts');
	return () unless $data;
	return map {
		[
			$_->{labels}{alertname}, $_->{labels}{workload} // '',
			$_->{state}
		]
	} @{ $data->{alerts} };
}

# Prometheus is up, has loaded the rules, and scrapes bulkhead's metrics.
ok( wait_for(
		90,
		sub {
			my @r = query('bulkhead_max_running{workload="w"}');
			return @r == 1 && $r[0][1] == 1;
		}),
	'Prometheus scrapes bulkhead_max_running{workload="w"} 1 from the exporter'
) or BAIL_OUT_LOGS();
my $groups = api('rules');
my @loaded =
  map { $_->{name} } map { @{ $_->{rules} } } @{ $groups->{groups} // [] };
ok((grep { $_ eq 'BulkheadCallersRejected' } @loaded),
	'the rules are loaded (' . scalar(@loaded) . ' rules)');
is_deeply([ grep { $_->[0] eq 'BulkheadCallersRejected' } alerts() ],
	[], 'no rejection alert before the overload');

#
# The overload: four sessions, each looping for up to 60 s over acquire,
# 20 ms of work, release; a caller that finds the permit taken gets 53B01
# and tries again. They run until the alert fires, then a row in
# overload_stop ends them (each statement of the loop sees it: READ
# COMMITTED takes a new snapshot per statement).
#
$node->safe_psql('postgres', 'CREATE TABLE overload_stop ()');
my @s = map { session($node) } 1 .. 4;
my $loop = q{
DO $$
DECLARE
  t0 timestamptz := clock_timestamp();
BEGIN
  WHILE clock_timestamp() < t0 + interval '60 s' LOOP
    BEGIN
      PERFORM bulkhead_acquire('w');
      PERFORM pg_sleep(0.02);
      PERFORM bulkhead_release('w');
    EXCEPTION WHEN SQLSTATE '53B01' THEN
      PERFORM pg_sleep(0.005);
    END;
    EXIT WHEN EXISTS (SELECT FROM overload_stop);
  END LOOP;
END
$$;
};
send_async($_, $loop) for @s;
my $t0 = time();

ok( poll_until(
		$node,
		"SELECT rejected_full >= 50 FROM bulkhead_stats WHERE workload = 'w'"),
	'the overload makes callers fail with 53B01 (bulkhead_stats.rejected_full >= 50)');

my $fired = wait_for(
	120,
	sub {
		return grep {
			$_->[0] eq 'BulkheadCallersRejected'
			  && $_->[1] eq 'w'
			  && $_->[2] eq 'firing'
		} alerts();
	});
ok($fired,
	sprintf('BulkheadCallersRejected{workload="w"} firing %.0f s after the overload began',
		time() - $t0));

# Stop the overload.
$node->safe_psql('postgres', 'INSERT INTO overload_stop DEFAULT VALUES');
for my $s (@s)
{
	my ($o, $e) = finish_async($s);
	is($e, '', 'an overload session ended without an error');
	close_session($s);
}

my @rate = query('bulkhead_workload:rejected_full:rate5m{workload="w"}');
ok(@rate == 1 && $rate[0][1] > 0.1,
	'recording rule bulkhead_workload:rejected_full:rate5m{workload="w"} > 0.1'
	  . (@rate ? " ($rate[0][1])" : ' (no sample)'));

# Only the overloaded workload alerts: nothing for 'calm', no other alert
# (no timeouts, no deadlock, the metrics are there, the exporter connects).
my @all = alerts();
is_deeply(
	[ sort map { "$_->[0]/$_->[1]/$_->[2]" } @all ],
	['BulkheadCallersRejected/w/firing'],
	'the only alert is BulkheadCallersRejected for w, firing')
  or diag(explain(\@all));

sub BAIL_OUT_LOGS
{
	for my $log ('160_alerts_exporter.log', '160_alerts_prometheus.log')
	{
		my $f = "$logdir/$log";
		diag("$log:\n" . slurp_file($f)) if -f $f;
	}
	return;
}
BAIL_OUT_LOGS() unless $fired;

ok(stop_child('prometheus'), 'prometheus stopped by SIGTERM');
ok(stop_child('exporter'), 'exporter stopped by SIGTERM');
$node->stop;

done_testing();
