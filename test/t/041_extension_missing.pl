# The worker's database exists but has no bulkhead extension yet: the worker
# says so in the log, keeps running, and acquires (from another database)
# fail at once with 42704; once the extension is created and a workload
# inserted there, it is loaded and usable from every database.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('extension_missing');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'bulkhead'\nbulkhead.database = 'postgres'\n");
$node->start;

ok( $node->poll_query_until(
		'postgres', "SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'bulkhead'"),
	'the worker runs');
ok( poll_until_log(
		$node, qr/extension "bulkhead" is not installed in database "postgres"; no workloads are defined/),
	'it logs that the extension is missing');

# the functions, in another database
$node->safe_psql('postgres', 'CREATE DATABASE app');
$node->safe_psql('app', 'CREATE EXTENSION bulkhead');
my ($ret, $out, $err) = $node->psql('app',
	"\\set VERBOSITY verbose\nSET statement_timeout = '5s';\nSELECT bulkhead_acquire('w')");
isnt($ret, 0, 'acquire fails');
like($err, qr/ERROR:  42704: workload "w" does not exist/, 'at once, with 42704');

# now the extension and a workload in bulkhead.database
$node->safe_psql('postgres', 'CREATE EXTENSION bulkhead');
$node->safe_psql('postgres',
	"INSERT INTO bulkhead_workload (name, max_running) VALUES ('w', 1)");
ok( $node->poll_query_until('app',
		"SELECT count(*) = 1 FROM bulkhead_stats WHERE workload = 'w'"),
	'the workload is loaded');
is($node->safe_psql('app', "SELECT bulkhead_try_acquire('w'), bulkhead_release_all()"),
	't|1', 'and usable from another database');
is(worker_pid($node) ne '', 1, 'the worker never stopped');

$node->stop;
done_testing();

# wait (bounded) until the server log matches $re
sub poll_until_log
{
	my ($node, $re) = @_;
	for (1 .. 300)
	{
		return 1 if slurp_file($node->logfile) =~ $re;
		select(undef, undef, undef, 0.1);
	}
	return 0;
}
