# 204_tenants_new_keys.pl: a stream of new keys does not starve a group
# that waited before them.  A new key starts level with the least served
# group in use; a group that waits holds nothing, so its service stays put,
# and a new key must not win that tie ("the key granted least recently":
# a new key's arrival counts as its last grant).  Found by the stress
# tool's tenants mode: callers without a key were served on 2% of their
# attempts beside a stream of one-off keys.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use BulkheadTest;

my $node = bulkhead_node('tenants_new_keys');
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout)
	VALUES ('t', 2, 100, '60s');});
wait_loaded($node, 't', 2);

sub state_of
{
	return $node->safe_psql('postgres',
		"SELECT coalesce(string_agg(coalesce(key, '-') || ':' || state, ',' ORDER BY key), '')"
		  . " FROM bulkhead_activity WHERE workload = 't'");
}

# key z holds one of the two permits throughout: the workload stays keyed
my $z = session($node);
sql($z, "SELECT bulkhead_acquire('t', NULL, 'z')");

# the callers without a key are granted once while the workload is keyed
my $h = session($node);
sql($h, "SELECT bulkhead_acquire('t', NULL, 'k0')");
my $u1 = session($node);
send_async($u1, "SELECT bulkhead_acquire('t');");
ok(poll_until($node, "SELECT count(*) = 1 FROM bulkhead_activity WHERE state = 'queued'"), 'u1 waits');
sql($h, "SELECT bulkhead_release('t')");
my (undef, $err) = finish_async($u1);
is($err, '', 'u1 (no key) is granted');

# u2 (no key) waits; then n1, a new key; u1's release goes to one of them
my $u2 = session($node);
send_async($u2, "SELECT bulkhead_acquire('t');");
ok(poll_until($node, "SELECT count(*) = 1 FROM bulkhead_activity WHERE state = 'queued' AND key IS NULL"),
	'u2 (no key) waits');
my $prev = session($node);
send_async($prev, "SELECT bulkhead_acquire('t', NULL, 'n1');");
ok(poll_until($node, "SELECT count(*) = 1 FROM bulkhead_activity WHERE state = 'queued' AND key = 'n1'"),
	'n1 (a new key) waits');
usleep(100_000);
sql($u1, "SELECT bulkhead_release('t')");

# Rounds: a new key arrives while the last one holds (its service then
# passes the waiting group's), then the holder releases.  u2, waiting
# since before every new key, must get a permit within the first rounds.
my $served_at;
for my $i (1 .. 6)
{
	if ($node->safe_psql('postgres', "SELECT state FROM bulkhead_activity WHERE key IS NULL") eq 'running')
	{
		$served_at = $i;
		last;
	}
	usleep(200_000);
	my $n = session($node);
	my $next = $i + 1;
	send_async($n, "SELECT bulkhead_acquire('t', NULL, 'n$next');");
	poll_until($node,
		"SELECT count(*) = 1 FROM bulkhead_activity WHERE key = 'n$next'");
	finish_async($prev);
	sql($prev, "SELECT bulkhead_release('t')");
	ok(poll_until($node, "SELECT count(*) = 2 FROM bulkhead_activity WHERE state = 'running'"),
		"round $i: the release is passed on (" . state_of() . ")");
	close_session($prev);
	$prev = $n;
}
ok(defined $served_at && $served_at <= 2,
	'the caller without a key, waiting before the new keys, is served at once or after one of them'
	  . (defined $served_at ? " (round $served_at)" : ' (never, beside 6 new keys)'));

$node->stop('immediate');
done_testing();
