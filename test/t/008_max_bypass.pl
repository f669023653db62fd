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

# Queue waiters named @names for workload $w, one after the other (each
# queued and asleep before the next, behind those already queued); each records its grant in table
# grants, holds the permit a moment, and releases it.
sub queue_waiters
{
	my ($w, @names) = @_;
	my @sessions;
	my $n = $node->safe_psql('postgres',
		"SELECT count(*) FROM bulkhead_activity WHERE workload = '$w' AND state = 'queued'");
	for my $name (@names)
	{
		my $s = session($node);
		push @sessions, $s;
		$n++;
		send_async($s,
			    "SELECT bulkhead_acquire('$w');"
			  . " INSERT INTO grants (who) VALUES ('$name');"
			  . " SELECT pg_sleep(0.05);"
			  . " SELECT bulkhead_release('$w');");
		ok( poll_until(
				$node,
				"SELECT count(*) = $n FROM bulkhead_activity a JOIN pg_stat_activity p USING (pid)"
				  . " WHERE a.workload = '$w' AND a.state = 'queued' AND p.wait_event_type = 'Extension'"
			),
			"$w: $name is queued");
	}
	return @sessions;
}

sub grant_order
{
	my ($n) = @_;
	ok(poll_until($node, "SELECT count(*) = $n FROM grants", 30), "$n grants made");
	my $order = $node->safe_psql('postgres', "SELECT string_agg(who, ',' ORDER BY id) FROM grants");
	$node->safe_psql('postgres', 'TRUNCATE grants');
	return $order;
}

sub finish
{
	for my $s (@_)
	{
		my (undef, $err) = finish_async($s);
		is($err, '', 'a waiter acquired and released without error');
		close_session($s);
	}
}

# 1. newest first: the holder's release goes to c, c's to b, b's to a
my $h = session($node);
sql($h, "SELECT bulkhead_acquire('w')");
my @s = queue_waiters('w', qw(a b c));
sql($h, "SELECT bulkhead_release('w')");
is(grant_order(3), 'c,b,a', 'with max_bypass, the newest waiter is served first');
finish(@s);

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
@s = queue_waiters('w', qw(a b));
usleep(2_200_000);
push @s, queue_waiters('w', qw(c d));
sql($h, "SELECT bulkhead_release('w')");
is(grant_order(4), 'a,b,d,c',
	'waiters past max_bypass are served first, oldest first; then the newest');
finish(@s);

# 3. NULL: arrival order again, from the next grant on
set_max_bypass('NULL', 12);
sql($h, "SELECT bulkhead_acquire('w')");
@s = queue_waiters('w', qw(a b c));
sql($h, "SELECT bulkhead_release('w')");
is(grant_order(3), 'a,b,c', 'max_bypass NULL: arrival order');
finish(@s);

# 4. a leaf under a budget: the leaf's newest waiter first
sql($h, "SELECT bulkhead_acquire('leaf')");
@s = queue_waiters('leaf', qw(a b c));
sql($h, "SELECT bulkhead_release('leaf')");
is(grant_order(3), 'c,b,a', 'a leaf in a tree of budgets: newest first too');
finish(@s);

my $st = $node->safe_psql('postgres',
	"SELECT string_agg(workload || ' ' || running || '/' || queued || ' ' || acquired || '=' || released, ', ' ORDER BY workload)"
	  . " FROM bulkhead_stats WHERE workload IN ('w', 'leaf', 'p')");
is($st, 'leaf 0/0 4=4, p 0/0 4=4, w 0/0 13=13',
	'nothing left running or queued; every permit acquired was released');

close_session($h);
$node->stop;
done_testing();
