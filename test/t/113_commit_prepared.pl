# 113_commit_prepared.pl: a change of bulkhead_workload committed with
# COMMIT PREPARED is loaded within a second or two, as a plain commit is,
# and not at the worker's ten-second poll; whichever backend commits it.
# A prepared change that is rolled back changes nothing.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $node = PostgreSQL::Test::Cluster->new('commit_prepared');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'bulkhead'\n"
	  . "bulkhead.database = 'postgres'\n"
	  . "max_prepared_transactions = 4\n"
	  . "log_line_prefix = '%m [%p] %b '\n");
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION bulkhead;
	INSERT INTO bulkhead_workload (name, max_running) VALUES ('p', 1);
});
wait_loaded($node, 'p', 1);

for my $round (1 .. 3)
{
	my $b = $round + 1;
	$node->safe_psql('postgres', qq{
		BEGIN;
		UPDATE bulkhead_workload SET max_running = $b WHERE name = 'p';
		PREPARE TRANSACTION 'change$round';
	});
	# prepared, not visible: the worker (which looks at PREPARE, or polls)
	# must not have loaded it
	sleep 1;
	is($node->safe_psql('postgres',
			"SELECT max_running FROM bulkhead_stats WHERE workload = 'p'"),
		$round, "round $round: a prepared change is not loaded");
	my $start = time();
	# from another backend than the one that prepared it
	$node->safe_psql('postgres', "COMMIT PREPARED 'change$round'");
	ok( poll_until(
			$node,
			"SELECT max_running = $b FROM bulkhead_stats WHERE workload = 'p'",
			30),
		"round $round: the committed change is loaded");
	my $took = time() - $start;
	ok($took < 4, sprintf("round $round: loaded %.1f s after COMMIT PREPARED (under 4 s; the poll takes 10)", $took));
}

# rolled back: nothing changes, and the worker stops polling fast
$node->safe_psql('postgres', q{
	BEGIN;
	UPDATE bulkhead_workload SET max_running = 9 WHERE name = 'p';
	PREPARE TRANSACTION 'undone';
});
$node->safe_psql('postgres', "ROLLBACK PREPARED 'undone'");
sleep 2;
is($node->safe_psql('postgres',
		"SELECT max_running FROM bulkhead_stats WHERE workload = 'p'"),
	'4', 'a prepared change rolled back is not loaded');

$node->stop;
done_testing();
