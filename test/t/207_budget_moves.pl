# 207_budget_moves.pl: runaway holders moved by max_hold across trees of
# budgets pair acquired and released at every level.  A move counts in
# moved_out at the leaf it leaves and at every budget above it that is not
# above the leaf it joins, and in moved_in at the leaf it joins and at
# every budget above that one that is not above the leaf it left; a budget
# above both keeps the permit in its subtree and counts nothing.  So at
# every level, at every step: acquired + moved_in = released + moved_out
# + running, and running is what its subtree really holds (levels_hold,
# BulkheadTest.pm).
#
#   g1 (10) -- p1 (3) -- a      move_to b:    p1 out, p2 in
#                     -- ar     move_to r:    p1 and g1 out, r in
#                     -- as     move_to sib:  no budget counts it
#                     -- sib
#           -- p2 (3) -- b
#   r (3), a root outside any tree
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = bulkhead_node('budget_moves');
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running) VALUES ('g1', 10), ('r', 3);
	INSERT INTO bulkhead_workload (name, max_running, parent) VALUES
	    ('p1', 3, 'g1'), ('p2', 3, 'g1');
	INSERT INTO bulkhead_workload (name, max_running, parent) VALUES
	    ('b', 3, 'p2'), ('sib', 3, 'p1');
	INSERT INTO bulkhead_workload (name, max_running, parent, max_hold, on_max_hold, move_to) VALUES
	    ('a',  3, 'p1', '200ms', 'move', 'b'),
	    ('ar', 3, 'p1', '200ms', 'move', 'r'),
	    ('as', 3, 'p1', '200ms', 'move', 'sib');
});
ok(poll_until($node, "SELECT count(*) = 9 FROM bulkhead_stats"), 'the trees are loaded');
levels_hold($node, 'idle');

my ($s, $pid) = verbose_session($node);

# the moves counted by every workload, "w:moved_out/moved_in,..."
sub moves
{
	return $node->safe_psql('postgres',
		"SELECT string_agg(workload || ':' || moved_out || '/' || moved_in, ','"
		  . " ORDER BY workload) FROM bulkhead_stats");
}

# Take a permit of $from, wait until the worker moved it to $to, check
# every level while it is held there, release it.
sub move_one
{
	my ($from, $to, $moves, $label) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	is(sql($s, "SELECT bulkhead_acquire('$from')"), '', "$label: $from acquired");
	ok( poll_until(
			$node,
			"SELECT workload = '$to' AND moved_from = '$from' FROM bulkhead_activity"
			  . " WHERE pid = $pid",
			30),
		"$label: the permit moved from $from to $to");
	is(moves(), $moves, "$label: the moves counted at each level");
	levels_hold($node, "$label, held in $to");
	is(sql($s, "SELECT bulkhead_release('$from')"), '', "$label: released by its old name");
	levels_hold($node, "$label, released");
}

move_one('a', 'b',
	'a:1/0,ar:0/0,as:0/0,b:0/1,g1:0/0,p1:1/0,p2:0/1,r:0/0,sib:0/0',
	'to a leaf under another budget');
move_one('ar', 'r',
	'a:1/0,ar:1/0,as:0/0,b:0/1,g1:1/0,p1:2/0,p2:0/1,r:0/1,sib:0/0',
	'to a root outside the tree');
move_one('as', 'sib',
	'a:1/0,ar:1/0,as:1/0,b:0/1,g1:1/0,p1:2/0,p2:0/1,r:0/1,sib:0/1',
	'to a sibling under the same budget');

is( $node->safe_psql('postgres',
		"SELECT string_agg(workload || ':' || acquired || '/' || released, ',' ORDER BY workload)"
		  . " FROM bulkhead_stats"),
	'a:1/0,ar:1/0,as:1/0,b:0/1,g1:3/2,p1:3/1,p2:0/1,r:0/1,sib:0/1',
	'each grant counted where it was made, each release where the permit was then');
close_session($s);
$node->stop;
done_testing();
