# 116_prepared_restart.pl: a change of bulkhead_workload left prepared
# across a server restart (its shared memory is new, so no backend's PREPARE
# set the prepared-change flag in it) and committed after the restart with
# COMMIT PREPARED is loaded within a second or two, not at the worker's
# ten-second poll.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $node = PostgreSQL::Test::Cluster->new('prepared_restart');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'bulkhead'\n"
	  . "bulkhead.database = 'postgres'\n"
	  . "max_prepared_transactions = 4\n");
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION bulkhead;
	INSERT INTO bulkhead_workload (name, max_running) VALUES ('p', 1);
});
wait_loaded($node, 'p', 1);

$node->safe_psql('postgres', q{
	BEGIN;
	UPDATE bulkhead_workload SET max_running = 2 WHERE name = 'p';
	PREPARE TRANSACTION 'across_restart';
});
$node->restart;
wait_loaded($node, 'p', 1);
# let the worker's first loads after the start go by
sleep 2;
is($node->safe_psql('postgres',
		"SELECT max_running FROM bulkhead_stats WHERE workload = 'p'"),
	'1', 'the prepared change is not loaded after the restart');

my $start = time();
$node->safe_psql('postgres', "COMMIT PREPARED 'across_restart'");
ok( poll_until(
		$node,
		"SELECT max_running = 2 FROM bulkhead_stats WHERE workload = 'p'",
		30),
	'the change committed after the restart is loaded');
my $took = time() - $start;
ok($took < 4,
	sprintf("loaded %.1f s after COMMIT PREPARED (under 4 s; the poll takes 10)",
		$took));

$node->stop;
done_testing();
