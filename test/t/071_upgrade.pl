# Upgrade 1.0 -> 1.1: a 1.0 install keeps working with the 1.1 library
# (bulkhead_stats with its 24 columns), ALTER EXTENSION bulkhead UPDATE keeps
# the workload rows, and the upgraded extension has exactly the objects of a
# fresh 1.1 install: pg_dump --schema-only --binary-upgrade (which lists an
# extension's member objects) of both databases is the same, object ids
# aside.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('upgrade');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'bulkhead'\nbulkhead.database = 'postgres'\n");
$node->start;

$node->safe_psql('postgres', q{
	CREATE EXTENSION bulkhead VERSION '1.0';
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
	VALUES ('kept', 3, 7, '2s');
});
wait_loaded($node, 'kept', 3);
is($node->safe_psql('postgres', 'SELECT extversion FROM pg_extension WHERE extname = $$bulkhead$$'),
	'1.0', 'version 1.0 installed');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM information_schema.columns WHERE table_name = 'bulkhead_stats'"),
	'24', 'the 1.0 view has 24 columns');
is($node->safe_psql('postgres',
		"SELECT workload || ' ' || running || ' ' || (stats_reset IS NOT NULL) FROM bulkhead_stats"),
	'kept 0 true', 'the 1.0 bulkhead_stats works with the 1.1 library');

$node->safe_psql('postgres', 'ALTER EXTENSION bulkhead UPDATE');
is($node->safe_psql('postgres', 'SELECT extversion FROM pg_extension WHERE extname = $$bulkhead$$'),
	'1.1', 'updated to 1.1');
is($node->safe_psql('postgres',
		'SELECT name, max_running, max_queued, queue_timeout FROM bulkhead_workload'),
	'kept|3|7|00:00:02', 'the workload rows are kept');
is($node->safe_psql('postgres', "SELECT deadlocks FROM bulkhead_stats WHERE workload = 'kept'"),
	'0', 'bulkhead_stats has the deadlocks column');
is($node->safe_psql('postgres', 'SELECT bulkhead_blocking_pids(pg_backend_pid())'),
	'{}', 'bulkhead_blocking_pids exists');
is($node->safe_psql('postgres',
		"SELECT has_table_privilege('public', 'bulkhead_stats', 'SELECT')"),
	't', 'the view is readable by PUBLIC again');

$node->safe_psql('postgres', 'CREATE DATABASE fresh');
$node->safe_psql('fresh', 'CREATE EXTENSION bulkhead');

# the schema of a database, without what differs by nature: the
# binary-upgrade lines that carry object ids and transaction ids, pg_dump's
# version line
sub schema_of
{
	my ($db) = @_;
	my ($out, $err);
	IPC::Run::run(
		[
			'pg_dump', '--schema-only', '--binary-upgrade', '--no-comments',
			'-d', $node->connstr($db)
		],
		'>', \$out, '2>', \$err)
	  or die "pg_dump $db failed: $err";
	my @lines = grep {
		!/binary_upgrade|relfrozenxid|^WHERE oid = '\d+'|^-- Dumped|^SELECT pg_catalog\.set_config|^\\(un)?restrict /
	} split /\n/, $out;
	return join("\n", @lines) . "\n";
}

my $upgraded = schema_of('postgres');
my $fresh = schema_of('fresh');
like($fresh, qr/bulkhead_blocking_pids/, 'the dump lists the extension\'s members');
is($upgraded, $fresh, 'an upgraded 1.0 has exactly the objects of a fresh 1.1');

$node->stop;
done_testing();
