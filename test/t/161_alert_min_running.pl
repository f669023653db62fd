# 161_alert_min_running.pl: the metrics BulkheadAdaptiveLimitAtMin needs,
# from the real prometheus-postgres-exporter running as a monitoring role,
# and the alert end to end with the real Prometheus.
#
#  1. The exporter connects as a role with pg_monitor only: the query
#     bulkhead_config fails ("permission denied for table
#     bulkhead_workload"), pg_exporter_last_scrape_error is 1, and
#     bulkhead_config_min_running is missing while bulkhead_stats' metrics
#     are there.
#  2. After the GRANT that bulkhead-queries.yaml documents (SELECT on the
#     columns name, adaptive and min_running), the same exporter exports
#     bulkhead_config_min_running and bulkhead_config_adaptive for every
#     workload, with bulkhead_stats' labels, and no query fails.
#  3. Prometheus scrapes it with the rules of bulkhead-alerts.yaml, whose
#     BulkheadAdaptiveLimitAtMin holds 5 s instead of 15 minutes (the
#     expression is unchanged). Workload "hot" (adaptive, bounds [3, 8], its
#     limit at 3) gets six sessions that update one row and sleep while
#     holding it: the holders wait for each other's row lock, so the worker
#     keeps the limit at min_running while three callers queue, and the
#     alert fires for "hot". It does not fire for "fixed" (not adaptive,
#     max_running = min_running = 2, both permits held and a caller queued
#     the whole time) nor for "idle" (adaptive, at min_running, nobody
#     waits).
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
use Time::HiRes qw(usleep time);
use BulkheadTest;
use PromTest;

prom_require();
my $queries = $prom_queries;

my $logdir = $PostgreSQL::Test::Utils::log_path;
my $tmp = PostgreSQL::Test::Utils::tempdir('alert_min_running');
my $exporter_log = "$logdir/161_alert_min_running_exporter.log";
my $prometheus_log = "$logdir/161_alert_min_running_prometheus.log";

sub show_logs
{
	for my $f ($exporter_log, $prometheus_log)
	{
		diag("$f:\n" . slurp_file($f)) if -f $f;
	}
	return;
}

my $node = bulkhead_node('alert_min_running');

# "hot" and "idle" are created with min_running = max_running, then
# max_running raised: an UPDATE keeps the limit in force, so they sit at
# min_running (3 and 2) whatever the CPU count. "fixed" is not adaptive.
$node->safe_psql(
	'postgres', q{
	CREATE TABLE hot_row (id int PRIMARY KEY, n int NOT NULL);
	INSERT INTO hot_row VALUES (1, 0);
	CREATE TABLE load_stop ();
	INSERT INTO bulkhead_workload
	    (name, max_running, min_running, adaptive, max_queued, queue_timeout)
	VALUES ('hot', 3, 3, true, 16, '60s'),
	       ('idle', 2, 2, true, 4, '60s'),
	       ('fixed', 2, 2, false, 4, '600s');
	});
wait_loaded($node, 'hot', 3);
wait_loaded($node, 'idle', 2);
wait_loaded($node, 'fixed', 2);
$node->safe_psql('postgres',
	"UPDATE bulkhead_workload SET max_running = 8 WHERE name IN ('hot', 'idle')");
wait_loaded($node, 'hot', 8);
wait_loaded($node, 'idle', 8);
is( $node->safe_psql(
		'postgres', q{
		SELECT string_agg(workload || ':' || current_limit || '/' || max_running, ' '
		                  ORDER BY workload)
		  FROM bulkhead_stats}),
	'fixed:2/2 hot:3/8 idle:2/8',
	'limits in force: hot and idle at min_running, below max_running 8');

# The exporter's role: pg_monitor, as doc/monitoring.md advises, and nothing else.
$node->safe_psql('postgres',
	'CREATE ROLE prom LOGIN; GRANT pg_monitor TO prom');

my $dsn =
	'host=' . $node->host
  . ' port=' . $node->port
  . ' user=prom dbname=postgres sslmode=disable';
my $exporter_port = start_exporter($exporter_log, $dsn);

# One scrape of the exporter: { name => [ { labels => {...}, value => v } ] }
# and { name => type }; () if it did not answer.
sub scrape
{
	my $res = prom_http()->get("http://127.0.0.1:$exporter_port/metrics");
	return () unless $res->{success};
	return parse_metrics($res->{content});
}

# "workload/mode=value ..." of metric $name in a scrape, sorted; the other
# labels (the exporter's server) are left out.
sub by_workload
{
	my ($samples, $name) = @_;
	return join ' ', sort map {
		"$_->{labels}{workload}/$_->{labels}{mode}=$_->{value}"
	} @{ $samples->{$name} // [] };
}

#
# 1. Without the GRANT.
#
my ($samples, $types);
ok( prom_wait_for(
		60,
		sub {
			($samples, $types) = scrape();
			return $samples
			  && ($samples->{pg_up}[0]{value} // 0) == 1
			  && by_workload($samples, 'bulkhead_max_running') ne '';
		}),
	'the exporter (role prom, pg_monitor) exports bulkhead_max_running')
  or show_logs();
is( by_workload($samples, 'bulkhead_current_limit'),
	'fixed/enforce=2 hot/enforce=3 idle/enforce=2',
	'without the GRANT: bulkhead_current_limit is exported');
is(by_workload($samples, 'bulkhead_config_min_running'),
	'', 'without the GRANT: no bulkhead_config_min_running');
is($samples->{pg_exporter_last_scrape_error}[0]{value},
	1, 'without the GRANT: pg_exporter_last_scrape_error 1');
like(
	slurp_file($exporter_log),
	qr/permission denied for table bulkhead_workload/,
	'the exporter logs: permission denied for table bulkhead_workload');

#
# 2. With the GRANT of bulkhead-queries.yaml: the line that the file says
# to run, checked to be there, then run.
#
my $grant =
  'GRANT SELECT (name, adaptive, min_running) ON bulkhead_workload TO prometheus;';
like(slurp_file($queries), qr/^#\s+\Q$grant\E$/m,
	'bulkhead-queries.yaml documents the GRANT');
(my $grant_prom = $grant) =~ s/TO prometheus;/TO prom/;
$node->safe_psql('postgres', $grant_prom);

ok( prom_wait_for(
		30,
		sub {
			($samples, $types) = scrape();
			return $samples
			  && by_workload($samples, 'bulkhead_config_min_running') ne '';
		}),
	'with the GRANT: bulkhead_config_min_running is exported') or show_logs();
is( by_workload($samples, 'bulkhead_config_min_running'),
	'fixed/enforce=2 hot/enforce=3 idle/enforce=2',
	'bulkhead_config_min_running per workload and mode');
is( by_workload($samples, 'bulkhead_config_adaptive'),
	'fixed/enforce=0 hot/enforce=1 idle/enforce=1',
	'bulkhead_config_adaptive per workload and mode');
is($types->{$_}, 'gauge', "# TYPE $_ gauge")
  for qw(bulkhead_config_min_running bulkhead_config_adaptive);
is( join(',',
		sort keys %{ $samples->{bulkhead_config_min_running}[0]{labels} }),
	join(',', sort keys %{ $samples->{bulkhead_current_limit}[0]{labels} }),
	'bulkhead_config_min_running has the labels of bulkhead_current_limit');
is($samples->{pg_exporter_last_scrape_error}[0]{value},
	0, 'with the GRANT: pg_exporter_last_scrape_error 0');

# "fixed": both permits held, and a caller queued, from now to the end
# (before Prometheus starts, so that every sample it has shows the queue).
my @fixed = map { session($node) } 1 .. 3;
is((sql($fixed[$_], "SELECT bulkhead_acquire('fixed')"))[0],
	'', "fixed: holder $_ has its permit")
  for 0 .. 1;
send_async($fixed[2], "SELECT bulkhead_acquire('fixed');");

ok( poll_until(
		$node,
		"SELECT running = 2 AND queued = 1 FROM bulkhead_stats WHERE workload = 'fixed'"),
	'fixed: 2 running, 1 queued');

#
# 3. Prometheus, with BulkheadAdaptiveLimitAtMin's "for: 15m" set to 5 s.
#
my $api = start_prometheus($prometheus_log, $tmp, $exporter_port,
	'BulkheadAdaptiveLimitAtMin', '15m', '5s');
sub query { return prom_query($api, @_); }

# "alertname/workload/state" of every alert Prometheus has now, sorted.
sub alerts
{
	return sort map { join '/', @$_ } prom_alerts($api);
}

ok( prom_wait_for(
		90,
		sub {
			my @r = query('bulkhead_config_min_running{workload="hot"}');
			return @r == 1 && $r[0][1] == 3;
		}),
	'Prometheus scrapes bulkhead_config_min_running{workload="hot"} 3')
  or show_logs();
is(join(' ', grep { m{^BulkheadAdaptiveLimitAtMin/} } alerts()),
	'', 'no BulkheadAdaptiveLimitAtMin alert before the load');

# "hot": six sessions, each taking a permit, updating the one row of
# hot_row, sleeping 0.1 s with the row locked, committing and releasing,
# until a row appears in load_stop (or 150 s have passed).
my $loop = q{
DO $$
DECLARE
  t0 timestamptz := clock_timestamp();
BEGIN
  WHILE clock_timestamp() < t0 + interval '150 s'
        AND NOT EXISTS (SELECT FROM load_stop) LOOP
    PERFORM bulkhead_acquire('hot');
    UPDATE hot_row SET n = n + 1 WHERE id = 1;
    PERFORM pg_sleep(0.1);
    COMMIT;
    PERFORM bulkhead_release('hot');
  END LOOP;
END
$$;
};
my @hot = map { session($node) } 1 .. 6;
send_async($_, $loop) for @hot;
my $t0 = time();

ok( poll_until(
		$node, q{
		SELECT current_limit = 3 AND queued >= 1
		  FROM bulkhead_stats WHERE workload = 'hot'}),
	'hot: callers queue at the limit 3');

my @seen;
my $fired = prom_wait_for(
	120,
	sub {
		@seen = alerts();
		return grep { $_ eq 'BulkheadAdaptiveLimitAtMin/hot/firing' } @seen;
	});
ok($fired,
	sprintf(
		'BulkheadAdaptiveLimitAtMin{workload="hot"} firing %.0f s after the load began',
		time() - $t0))
  or diag("alerts: @seen");

# The conditions fixed meets: a queue of at least one on average, its limit
# equal to min_running. It is not adaptive, and its bounds are equal.
my @fq = query('avg_over_time(bulkhead_queued{workload="fixed"}[5m]) >= 1');
ok(@fq == 1, 'fixed: callers queued on average over the window'
	  . (@fq ? " ($fq[0][1])" : ' (no sample)'));
my @fl = query(
	'bulkhead_current_limit{workload="fixed"} == bulkhead_config_min_running');
ok(@fl == 1, 'fixed: its limit equals its min_running');
my @limit = query('bulkhead_current_limit{workload="hot"}');
is(@limit ? $limit[0][1] : undef, '3', 'hot: the limit in force is still 3');

# Past the 5 s "for" again: still only hot.
usleep(6_000_000);
is( join(' ', grep { m{^BulkheadAdaptiveLimitAtMin/} } alerts()),
	'BulkheadAdaptiveLimitAtMin/hot/firing',
	'BulkheadAdaptiveLimitAtMin fires for hot only (not fixed, not idle)');

# Stop the load.
$node->safe_psql('postgres', 'INSERT INTO load_stop DEFAULT VALUES');
for my $s (@hot)
{
	my ($o, $e) = finish_async($s);
	is($e, '', 'a hot session ended without an error');
	close_session($s);
}
is((sql($fixed[$_], "SELECT bulkhead_release('fixed')"))[0],
	'', "fixed: holder $_ released")
  for 0 .. 1;
my ($o, $e) = finish_async($fixed[2]);
is($e, '', 'fixed: the queued caller got its permit');
close_session($_) for @fixed;
is( $node->safe_psql('postgres',
		"SELECT timed_out + rejected_full FROM bulkhead_stats WHERE workload = 'hot'"),
	'0', 'hot: no caller timed out or was rejected');

show_logs() unless $fired;

ok(stop_child('prometheus'), 'prometheus stopped by SIGTERM');
ok(stop_child('exporter'), 'exporter stopped by SIGTERM');
$node->stop;

done_testing();
