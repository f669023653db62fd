# 151_guard_reload.pl: a session permit's guard, released when the value it
# replaced was the reset value, restores that setting as RESET does: to the
# reset value in force at the release.  A reload that changed the setting
# while the permit was held must apply, also when the release happens with
# a SET LOCAL (or a function's SET clause) in force, where the session-level
# value is one kept in guc.c's stack rather than the current one.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use BulkheadTest;
use Time::HiRes qw(usleep);

my $node = bulkhead_node('guard_reload');
$node->safe_psql(
	'postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout,
	                               statement_timeout)
	VALUES ('g', 2, 4, '10s', '1s');
	CREATE FUNCTION release_with_set_clause() RETURNS void LANGUAGE sql
	  SET statement_timeout = '5s' AS $$ SELECT bulkhead_release('g') $$;
	});
wait_loaded($node, 'g', 2);

my $s = session($node);

# acquire under file value $old, reload with $new, release by $release
sub check_release
{
	my ($new, $release, $what) = @_;
	is(sql($s, "SELECT bulkhead_acquire('g'); SHOW statement_timeout"),
		"\n1s", "$what: the guard applies");
	$node->safe_psql('postgres',
		"ALTER SYSTEM SET statement_timeout = '$new'; SELECT pg_reload_conf()");
	# the session reads the file when idle: poll it until it has
	my $seen = '';
	for (my $i = 0; $i < 200 && $seen ne 't'; $i++)
	{
		usleep(50_000);
		$seen = sql($s,
			"SELECT reset_val = '" . ($new =~ s/s$//r) * 1000
			  . "' FROM pg_settings WHERE name = 'statement_timeout'");
	}
	is($seen, 't', "$what: the session has read the new file value");
	is(sql($s, 'SHOW statement_timeout'), '1s',
		"$what: the guard still applies after the reload");
	sql($s, $release);
	is( sql(
			$s,
			"SELECT setting || ' ' || source FROM pg_settings"
			  . " WHERE name = 'statement_timeout'"),
		($new =~ s/s$//r) * 1000 . ' configuration file',
		"$what: the release restores the reloaded value");
}

check_release('7s', "SELECT bulkhead_release('g')", 'plain release');
check_release('8s',
	"BEGIN; SET LOCAL statement_timeout = '3s'; SELECT bulkhead_release('g'); COMMIT",
	'release under SET LOCAL');
check_release('9s', 'SELECT release_with_set_clause()',
	'release in a function with a SET clause');

close_session($s);
$node->stop;
done_testing();
