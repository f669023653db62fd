# 603_feedback_restart.pl: grant feedback's notes (1.5) are kept across a
# clean restart (saved at the shutdown, read back at the start), so the
# statement's next run asks what they say; after a crash they start empty.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use FeedbackTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = feedback_node('feedback_restart', "restart_after_crash = on\n");
$node->safe_psql('postgres', q{
	CREATE TABLE restart_t (g int, v text);
	INSERT INTO restart_t SELECT 1, md5(i::text) FROM generate_series(1, 10) i;
	ANALYZE restart_t;
	INSERT INTO restart_t SELECT 2, md5(i::text) FROM generate_series(1, 50000) i;
});
my $q = 'SELECT * FROM restart_t WHERE g = 2 ORDER BY v';
my $qid = query_id($node, $q);
explain_in($node, $q) for 1 .. 2;
my $before = notes($node, $qid);
like($before, qr/^\d+\|1\|\d+\|feedback$/, "two runs noted ($before)");

$node->restart;
wait_loaded($node, 'w', 8);
is(notes($node, $qid), $before, 'the notes survive a clean restart');
is(sort_method(explain_in($node, $q)), 'quicksort',
	'the first run after it asks from them and sorts in memory');

# a process killed: the postmaster starts over without the notes
kill 'KILL', worker_pid($node);
ok(poll_until_up($node), 'the server is back after the crash');
wait_loaded($node, 'w', 8);
is(notes($node, $qid), '', 'after a crash the notes start empty');
is(sort_method(explain_in($node, $q)), 'external', 'and the under-estimate spills again');

$node->stop;
done_testing();

sub poll_until_up
{
	my ($n) = @_;
	for (1 .. 300)
	{
		my ($rc, $out) = $n->psql('postgres', 'SELECT 1');
		return 1 if $rc == 0 && $out eq '1';
		select(undef, undef, undef, 0.1);
	}
	return 0;
}
