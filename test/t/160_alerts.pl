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

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use BulkheadTest;
use PromTest;

prom_require();

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
my $exporter_port = start_exporter("$logdir/160_alerts_exporter.log", $dsn);

#
# Prometheus: the rules file with BulkheadCallersRejected's "for" shortened
# to 5 s, a scrape of the exporter and an evaluation every second.
#
my $api = start_prometheus("$logdir/160_alerts_prometheus.log", $tmp,
	$exporter_port, 'BulkheadCallersRejected', '5m', '5s');
sub query { return prom_query($api, @_); }
sub alerts { return prom_alerts($api); }

# Prometheus is up, has loaded the rules, and scrapes bulkhead's metrics.
ok( prom_wait_for(
		90,
		sub {
			my @r = query('bulkhead_max_running{workload="w"}');
			return @r == 1 && $r[0][1] == 1;
		}),
	'Prometheus scrapes bulkhead_max_running{workload="w"} 1 from the exporter'
) or BAIL_OUT_LOGS();
my $groups = prom_api($api, 'rules');
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

my $fired = prom_wait_for(
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
