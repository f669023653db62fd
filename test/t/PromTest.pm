# PromTest.pm: the real prometheus-postgres-exporter and Prometheus beside a
# test cluster, for the end-to-end monitoring tests (160_alerts.pl,
# 161_alert_min_running.pl): the child processes (stopped at exit whatever
# happens), the rules file with one alert's "for" shortened, and Prometheus'
# HTTP API.
package PromTest;

use strict;
use warnings;

use Exporter 'import';
use FindBin;
use HTTP::Tiny;
use JSON::PP;
use POSIX qw(WNOHANG);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);

our @EXPORT = qw(prom_require start_exporter start_prometheus stop_child
  prom_wait_for prom_api prom_query prom_alerts prom_http parse_metrics
  $prom_queries
  $prom_rules);

my $exporter = '/usr/bin/prometheus-postgres-exporter';
my $prometheus = '/usr/bin/prometheus';
my $mondir = "$FindBin::RealBin/../../monitoring/prometheus";
our $prom_queries = "$mondir/bulkhead-queries.yaml";
our $prom_rules = "$mondir/bulkhead-alerts.yaml";

my $http = HTTP::Tiny->new(timeout => 10);
sub prom_http { return $http; }

# Child processes: name => pid.  The END block stops them.
my %pids;

# Both programs are required: when one is missing the test fails (it does
# not skip), saying what to install.
sub prom_require
{
	for my $bin ([ $exporter, 'prometheus-postgres-exporter' ],
		[ $prometheus, 'prometheus' ])
	{
		next if -x $bin->[0];
		fail("$bin->[0] not found: install the Debian package $bin->[1]"
			  . " (apt-get install $bin->[1])");
		done_testing();
		exit 1;
	}
	ok(-r $prom_queries && -r $prom_rules, 'query and rule files exist');
	return;
}

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

# Stop child $name (TERM, then KILL after 20 s); true if TERM sufficed
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

# The exporter with bulkhead's queries, connecting with $dsn, logging to
# $log; returns its port.
sub start_exporter
{
	my ($log, $dsn) = @_;
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	start_child(
		'exporter', $log,
		{ DATA_SOURCE_NAME => $dsn },
		$exporter,
		"--web.listen-address=127.0.0.1:$port",
		"--extend.query-path=$prom_queries",
		'--disable-default-metrics',
		'--disable-settings-metrics',
		'--no-collector.database',
		'--no-collector.bgwriter',
		'--log.level=info');
	return $port;
}

# Prometheus in $tmp, logging to $log, scraping the exporter at
# $exporter_port every second with bulkhead's rules, in which alert
# $alert's "for: $from" becomes "for: $to" (a test asserts it was found).
# Returns the base address of its HTTP API.
sub start_prometheus
{
	my ($log, $tmp, $exporter_port, $alert, $from, $to) = @_;
	open(my $in, '<', $prom_rules) or die "read $prom_rules: $!";
	my $text = do { local $/; <$in> };
	close($in);
	my $n = ($text =~
		  s/(- alert: $alert\n(?:[ \t]+[^\n]*\n)*?[ \t]+for:[ \t]*)$from\n/${1}$to\n/
	);
	is($n, 1, "$alert found in the rules, \"for: $from\" set to $to");
	my $rules = "$tmp/bulkhead-alerts.yaml";
	open(my $out, '>', $rules) or die "write $rules: $!";
	print $out $text;
	close($out);

	my $port = PostgreSQL::Test::Cluster::get_free_port();
	my $config = "$tmp/prometheus.yml";
	open($out, '>', $config) or die "write $config: $!";
	print $out <<"EOF";
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - $rules
scrape_configs:
  - job_name: postgres
    static_configs:
      - targets: ['127.0.0.1:$exporter_port']
EOF
	close($out);
	mkdir("$tmp/tsdb") or die "mkdir: $!";
	start_child(
		'prometheus', $log,
		{},
		$prometheus,
		"--config.file=$config",
		"--storage.tsdb.path=$tmp/tsdb",
		"--web.listen-address=127.0.0.1:$port",
		'--log.level=info');
	return "http://127.0.0.1:$port/api/v1";
}

# Parse Prometheus' text exposition format: ({ name => [ { labels =>
# {...}, value => v } ] }, { name => type }).
sub parse_metrics
{
	my ($body) = @_;
	my (%samples, %types);
	for my $line (split /\n/, $body)
	{
		if ($line =~ /^# TYPE (\S+) (\S+)$/)
		{
			$types{$1} = $2;
		}
		elsif ($line =~ /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/)
		{
			my ($name, $labels, $value) = ($1, $2 // '', $3);
			my %l;
			while ($labels =~ /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)
			{
				$l{$1} = $2;
			}
			push @{ $samples{$name} }, { labels => \%l, value => $value };
		}
	}
	return (\%samples, \%types);
}

# Poll $cond (a sub returning true when done) every 0.5 s for up to
# $seconds, while the children run; true if it came true.
sub prom_wait_for
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

# GET $api/$path; the decoded "data" of a successful answer, or undef.
sub prom_api
{
	my ($api, $path) = @_;
	my $res = $http->get("$api/$path");
	return undef unless $res->{success};
	my $doc = eval { decode_json($res->{content}) };
	return undef unless $doc && ($doc->{status} // '') eq 'success';
	return $doc->{data};
}

# The instant value of a PromQL expression as a list of [labels, value].
sub prom_query
{
	my ($api, $expr) = @_;
	my $q = $expr;
	$q =~ s/([^A-Za-z0-9_.~-])/sprintf('%%%02X', ord($1))/ge;
	my $data = prom_api($api, "query?query=$q");
	return () unless $data && $data->{resultType} eq 'vector';
	return map { [ $_->{metric}, $_->{value}[1] ] } @{ $data->{result} };
}

# The alerts Prometheus has now: [name, workload, state]
sub prom_alerts
{
	my ($api) = @_;
	my $data = prom_api($api, 'alerts');
	return () unless $data;
	return map {
		[
			$_->{labels}{alertname}, $_->{labels}{workload} // '',
			$_->{state}
		]
	} @{ $data->{alerts} };
}

1;
