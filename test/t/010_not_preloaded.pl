# Without shared_preload_libraries the extension installs, but every
# function and view says clearly that it must be preloaded (55000 + hint),
# and nothing crashes.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest ();

my $node = PostgreSQL::Test::Cluster->new('not_preloaded');
$node->init;
$node->start;

$node->safe_psql('postgres', 'CREATE EXTENSION bulkhead');

my @calls = (
	"SELECT bulkhead_acquire('w')",
	"SELECT bulkhead_acquire_xact('w', '1s')",
	"SELECT bulkhead_try_acquire('w')",
	"SELECT bulkhead_try_acquire_xact('w')",
	"SELECT bulkhead_release('w')",
	"SELECT bulkhead_release_all()",
	"SELECT * FROM bulkhead_stats",
	"SELECT * FROM bulkhead_activity",
	"SELECT bulkhead_stats_reset()",
	"SELECT bulkhead_stats_reset('w')",
	"INSERT INTO bulkhead_workload (name, max_running) VALUES ('w', 1)");

foreach my $sql (@calls)
{
	my ($ret, $stdout, $stderr) = $node->psql('postgres',
		"\\set VERBOSITY verbose\n$sql");
	isnt($ret, 0, "fails: $sql");
	like($stderr, qr/ERROR:  55000: bulkhead must be loaded via "shared_preload_libraries"/,
		"55000 with a clear message: $sql");
	like($stderr, qr/HINT:  Add bulkhead to the "shared_preload_libraries" setting/,
		"hint names the setting: $sql");
}

# the server is still up and the table untouched
is($node->safe_psql('postgres', 'SELECT count(*) FROM bulkhead_workload'),
	'0', 'no row was written');

$node->stop;
done_testing();
