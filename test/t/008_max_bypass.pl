# 008_max_bypass.pl: the warm hand-off.  With max_bypass set, a release
# hands its permit to the newest waiter (the process that ran last); a
# waiter that has waited max_bypass is passed over no more, and those are
# served oldest first.  NULL keeps arrival order (001_fifo.pl).  The same
# holds for a leaf in a tree of budgets, and a change of max_bypass takes
# effect at the next grant.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use BulkheadTest;

my $node = bulkhead_node('max_bypass');
$node->safe_psql(
	'postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, max_bypass)
	VALUES ('w', 1, 10, '60s', '1h');
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
	VALUES ('p', 1, 0, '60s');
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, parent, max_bypass)
	VALUES ('leaf', 1, 10, '60s', 'p', '1h');
	CREATE TABLE grants (id serial PRIMARY KEY, who text NOT NULL);
	});
wait_loaded($node, 'w', 1);
wait_loaded($node, 'leaf', 1);

# bad values are refused by the table's constraint
my ($ret, $out, $err) = $node->psql('postgres',
	"UPDATE bulkhead_workload SET max_bypass = '0' WHERE name = 'w'",
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/23514.*bulkhead_workload_max_bypass_positive/s,
	'max_bypass = 0 is refused (23514)');

# 1. newest first: the holder's release goes to c, c's to b, b's to a
my $h = session($node);
sql($h, "SELECT bulkhead_acquire('w')");
my @s = queue_recorders($node, [ 'w', 'a' ], [ 'w', 'b' ], [ 'w', 'c' ]);
sql($h, "SELECT bulkhead_release('w')");
is(grant_order($node, 3), 'c,b,a', 'with max_bypass, the newest waiter is served first');
finish_recorders(@s);

# Change w's max_bypass; max_queued changes with it, so that the load of
# the row (one step) shows in bulkhead_stats
sub set_max_bypass
{
	my ($value, $max_queued) = @_;
	$node->safe_psql('postgres',
		"UPDATE bulkhead_workload SET max_bypass = $value, max_queued = $max_queued WHERE name = 'w'");
	ok( poll_until(
			$node,
			"SELECT count(*) = 1 FROM bulkhead_stats WHERE workload = 'w' AND max_queued = $max_queued"),
		"max_bypass = $value loaded");
}

# 2. a waiter that has waited max_bypass goes first: a and b wait past
# 2 s; c, d arrive later; the release serves a, then b (oldest first
# among those past the bound), then d, c (newest first)
set_max_bypass("'2s'", 11);
sql($h, "SELECT bulkhead_acquire('w')");
@s = queue_recorders($node, [ 'w', 'a' ], [ 'w', 'b' ]);
usleep(2_200_000);
push @s, queue_recorders($node, [ 'w', 'c' ], [ 'w', 'd' ]);
sql($h, "SELECT bulkhead_release('w')");
is(grant_order($node, 4), 'a,b,d,c',
	'waiters past max_bypass are served first, oldest first; then the newest');
finish_recorders(@s);

# 3. NULL: arrival order again, from the next grant on
set_max_bypass('NULL', 12);
sql($h, "SELECT bulkhead_acquire('w')");
@s = queue_recorders($node, [ 'w', 'a' ], [ 'w', 'b' ], [ 'w', 'c' ]);
sql($h, "SELECT bulkhead_release('w')");
is(grant_order($node, 3), 'a,b,c', 'max_bypass NULL: arrival order');
finish_recorders(@s);

# 4. a leaf under a budget: the leaf's newest waiter first
sql($h, "SELECT bulkhead_acquire('leaf')");
@s = queue_recorders($node, [ 'leaf', 'a' ], [ 'leaf', 'b' ], [ 'leaf', 'c' ]);
sql($h, "SELECT bulkhead_release('leaf')");
is(grant_order($node, 3), 'c,b,a', 'a leaf in a tree of budgets: newest first too');
finish_recorders(@s);

my $st = $node->safe_psql('postgres',
	"SELECT string_agg(workload || ' ' || running || '/' || queued || ' ' || acquired || '=' || released, ', ' ORDER BY workload)"
	  . " FROM bulkhead_stats WHERE workload IN ('w', 'leaf', 'p')");
is($st, 'leaf 0/0 4=4, p 0/0 4=4, w 0/0 13=13',
	'nothing left running or queued; every permit acquired was released');

close_session($h);
$node->stop;
done_testing();
