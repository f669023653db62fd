# 602_feedback_swing.pl: grant feedback (1.5) stops following a statement
# whose grants swing.  One statement (one queryid: its constant is not part
# of it) sorts 50000 rows for g = 1 and 10 for g = 2.  Four small runs in a
# row lower its request; the next big run spills (a spill right after a
# lowering); a small run lowers it again; the big one spills again: the
# second such swing leaves it at its limit (memory_source 'limit'), where it
# stays, small runs or not, until its notes are reset.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use FeedbackTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = feedback_node('feedback_swing');
$node->safe_psql('postgres', q{
	CREATE TABLE swing_t (g int, v text);
	INSERT INTO swing_t SELECT 1, md5(i::text) FROM generate_series(1, 50000) i;
	INSERT INTO swing_t SELECT 2, md5(i::text) FROM generate_series(1, 10) i;
	ANALYZE swing_t;
});
my $big = 'SELECT * FROM swing_t WHERE g = 1 ORDER BY v';
my $small = 'SELECT * FROM swing_t WHERE g = 2 ORDER BY v';
my $qid = query_id($node, $big);
is(query_id($node, $small), $qid, 'the big and the small run are one statement');

sub source { return (split /\|/, notes($node, $qid))[3] // ''; }

is(sort_method(explain_in($node, $big)), 'quicksort', 'a big run sorts in memory at its estimate');
explain_in($node, $small) for 1 .. 4;
my $low = (split /\|/, notes($node, $qid))[2];
cmp_ok($low, '<', 1024 * 1024, "four small runs lower its request ($low)");
is(sort_method(explain_in($node, $big)), 'external', 'the next big run spills (a swing)');
isnt(source(), 'limit', 'one swing is followed');
explain_in($node, $small);
is(sort_method(explain_in($node, $big)), 'external', 'lowered again, the big run spills again');
is(source(), 'limit', 'the second swing leaves it at its limit');

is(sort_method(explain_in($node, $big)), 'quicksort', 'at its limit the big run sorts in memory');
explain_in($node, $small) for 1 .. 4;
is(source(), 'limit', 'and small runs no longer lower it');
is(sort_method(explain_in($node, $big)), 'quicksort', 'the big run still sorts in memory');

$node->safe_psql('postgres', 'SELECT bulkhead_statement_memory_reset()');
is(notes($node, $qid), '', 'the reset forgets it');
explain_in($node, $small);
is(source(), 'feedback', 'noted afresh, it follows its use again');

$node->stop;
done_testing();
