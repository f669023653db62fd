# 080_upgrade.pl: the upgrade path, 1.0 -> 1.1 -> 1.2 -> 1.3 -> 1.4 -> 1.5,
# and to 1.5 from a fresh install of each earlier release.  A 1.0 install keeps
# working with the new library until it is updated; each ALTER EXTENSION
# bulkhead UPDATE keeps the workloads; afterwards the extension's objects
# are exactly those of a fresh CREATE EXTENSION at the default version (compared through the catalogs by
# extension_objects.sql, not through a list written by hand).

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use BulkheadTest;

my $objects_sql = slurp_file("$FindBin::RealBin/extension_objects.sql");
my $default_version = '1.5';

my $node = PostgreSQL::Test::Cluster->new('upgrade');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'bulkhead'\n"
	  . "bulkhead.database = 'postgres'\n");
$node->start;

$node->safe_psql('postgres', q{
	CREATE ROLE bh_reader;
	CREATE EXTENSION bulkhead VERSION '1.0';
	INSERT INTO bulkhead_workload
	    (name, max_running, max_queued, queue_timeout, statement_timeout,
	     lock_timeout, idle_timeout, roles, mode)
	VALUES ('reports', 2, 4, '200ms', '30s', '2s', '1min', '{bh_reader}', 'enforce'),
	       ('batch', 1, 0, '0', NULL, NULL, NULL, NULL, 'shadow');
});
is($node->safe_psql('postgres',
		"SELECT extversion FROM pg_extension WHERE extname = 'bulkhead'"),
	'1.0', 'version 1.0 installed');
wait_loaded($node, 'reports', 2);
wait_loaded($node, 'batch', 1);

# 1.0, not yet updated, served by the new library
is($node->safe_psql('postgres', q{
		SELECT count(*) FROM information_schema.columns
		WHERE table_name = 'bulkhead_stats'}),
	'24', 'the 1.0 view has its 24 columns');
is($node->safe_psql('postgres', q{
		SELECT bulkhead_acquire('batch');
		SELECT workload || ':' || running || ':' || acquired FROM bulkhead_stats ORDER BY 1;
		SELECT workload || ':' || state || ':' || scope FROM bulkhead_activity;
		SELECT bulkhead_release('batch');
		SELECT bulkhead_release_all();
		BEGIN;
		SELECT bulkhead_try_acquire_xact('batch');
		COMMIT;
		SELECT bulkhead_stats_reset('batch');
		SELECT acquired FROM bulkhead_stats WHERE workload = 'batch';}),
	"\nbatch:1:1\nreports:0:0\nbatch:running:session\n\n0\nt\n\n0",
	'1.0 functions and views work with the new library');

# the columns of 1.0 (1.1 adds adaptive and min_running, checked below)
my $rows_sql = q{
	SELECT name, max_running, max_queued, queue_timeout, statement_timeout,
	       lock_timeout, idle_timeout, roles, mode
	  FROM bulkhead_workload ORDER BY name};
my $rows_before = $node->safe_psql('postgres', $rows_sql);

# may PUBLIC execute the trigger functions? (1.1: yes; 1.2: no)
my $public_may_fire = q{
		SELECT string_agg(has_function_privilege('public', p.oid, 'EXECUTE')::text, ','
		                  ORDER BY p.proname)
		  FROM pg_proc p
		 WHERE p.proname IN ('bulkhead_workload_changed', 'bulkhead_rule_changed')};

# first step: 1.0 -> 1.1
$node->safe_psql('postgres', "ALTER EXTENSION bulkhead UPDATE TO '1.1'");
is($node->safe_psql('postgres',
		"SELECT extversion FROM pg_extension WHERE extname = 'bulkhead'"),
	'1.1', 'updated to 1.1');
is($node->safe_psql('postgres', $rows_sql),
	$rows_before, 'the workload rows survive the update to 1.1');
# 1.1 still lets PUBLIC execute the trigger functions; 1.2 does not
is($node->safe_psql('postgres', $public_may_fire),
	'true,true', '1.1: PUBLIC may execute the trigger functions');

# second step: 1.1 -> 1.2
$node->safe_psql('postgres', "ALTER EXTENSION bulkhead UPDATE TO '1.2'");
is($node->safe_psql('postgres',
		"SELECT extversion FROM pg_extension WHERE extname = 'bulkhead'"),
	'1.2', 'updated to 1.2');
is($node->safe_psql('postgres', $rows_sql),
	$rows_before, 'the workload rows survive the update');
is($node->safe_psql('postgres', $public_may_fire),
	'false,false', '1.2: PUBLIC may no longer execute the trigger functions');
is($node->safe_psql('postgres',
		'SELECT name, adaptive, min_running FROM bulkhead_workload ORDER BY name'),
	"batch|f|1\nreports|f|1",
	'the new columns take their defaults: not adaptive, min_running 1');
is($node->safe_psql('postgres',
		'SELECT name, parent IS NULL, reserved, weight FROM bulkhead_workload ORDER BY name'),
	"batch|t|0|100\nreports|t|0|100",
	'1.2\'s columns take their defaults: roots, nothing reserved, weight 100');
# third step: 1.2 -> 1.3.  An operator closed
# bulkhead_stats to all but a role, and made a view on it: the update keeps
# both (it replaces the view rather than dropping it).
$node->safe_psql('postgres', q{
	REVOKE SELECT ON bulkhead_stats FROM PUBLIC;
	GRANT SELECT ON bulkhead_stats TO bh_reader;
	CREATE VIEW my_stats AS SELECT workload, running FROM bulkhead_stats;});
$node->safe_psql('postgres', "ALTER EXTENSION bulkhead UPDATE TO '1.3'");
is($node->safe_psql('postgres', q{
		SELECT has_table_privilege('public', 'bulkhead_stats', 'SELECT'),
		       has_table_privilege('bh_reader', 'bulkhead_stats', 'SELECT'),
		       (SELECT count(*) FROM my_stats)}),
	'f|t|2', 'the update to 1.3 keeps the privileges on bulkhead_stats and the views on it');
$node->safe_psql('postgres', q{
	DROP VIEW my_stats;
	GRANT SELECT ON bulkhead_stats TO PUBLIC;
	REVOKE SELECT ON bulkhead_stats FROM bh_reader;});
is($node->safe_psql('postgres',
		"SELECT extversion FROM pg_extension WHERE extname = 'bulkhead'"),
	'1.3', 'updated to 1.3');
is($node->safe_psql('postgres', $rows_sql),
	$rows_before, 'the workload rows survive the update to 1.3');
is($node->safe_psql('postgres',
		'SELECT name, settings IS NULL FROM bulkhead_workload ORDER BY name'),
	"batch|t\nreports|t", '1.3\'s settings column takes its default: no lane settings');
# the new columns are checked as in a fresh install, and shown
my ($rc13, $out13, $err13) = $node->psql('postgres',
	"UPDATE bulkhead_workload SET settings = '{work_mem=lots}' WHERE name = 'batch'");
like($err13, qr/invalid setting "work_mem=lots" for workload "batch"/,
	'the settings check runs after the update');
$node->safe_psql('postgres', q{
	UPDATE bulkhead_workload SET settings = '{work_mem=1MB}' WHERE name = 'batch';
	INSERT INTO bulkhead_rule (position, workload, min_cost, command)
	VALUES (1, 'batch', 1e6, '{select}');});
ok( poll_until(
		$node, q{
		SELECT settings = '{work_mem=1MB}' FROM bulkhead_stats WHERE workload = 'batch'}),
	'bulkhead_stats shows the settings after the update');

# the kept rows can become a tree, checked as in a fresh install
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running) VALUES ('all', 2);
	UPDATE bulkhead_workload SET parent = 'all', reserved = 1 WHERE name IN ('batch', 'reports');});
my ($rc, $stdout, $stderr) = $node->psql('postgres',
	"UPDATE bulkhead_workload SET reserved = 2 WHERE name = 'reports'");
like($stderr, qr/reservations under budget "all" exceed its max_running/,
	'the budgets check runs after the update');
ok( poll_until(
		$node, q{
		SELECT string_agg(workload || ':' || coalesce(parent, '-') || ':' || reserved, ','
		                  ORDER BY workload) = 'all:-:0,batch:all:1,reports:all:1'
		  FROM bulkhead_stats}),
	'bulkhead_stats shows the tree (parent, reserved) after the update');
$node->safe_psql('postgres', q{
	UPDATE bulkhead_workload SET parent = NULL, reserved = 0;
	DELETE FROM bulkhead_workload WHERE name = 'all';});
ok( poll_until(
		$node, q{
		SELECT string_agg(workload || ':' || max_running || ':' || current_limit, ','
		                  ORDER BY workload) = 'batch:1:1,reports:2:2'
		  FROM bulkhead_stats}),
	'bulkhead_stats shows current_limit = max_running for the kept workloads');
is($node->safe_psql('postgres', q{
		SELECT bulkhead_acquire('batch');
		SELECT running FROM bulkhead_stats WHERE workload = 'batch';
		SELECT bulkhead_release('batch');}),
	"\n1\n", 'permits work after the update');

# fourth step: 1.3 -> 1.4, then (fifth) 1.4 -> 1.5, the default version.
# The operator closes the views to all but a role and makes views on them:
# both updates keep both.
$node->safe_psql('postgres', q{
	REVOKE SELECT ON bulkhead_stats, bulkhead_activity FROM PUBLIC;
	GRANT SELECT ON bulkhead_stats, bulkhead_activity TO bh_reader;
	CREATE VIEW my_stats AS SELECT workload, running FROM bulkhead_stats;
	CREATE VIEW my_activity AS SELECT pid, workload FROM bulkhead_activity;});
$node->safe_psql('postgres', "ALTER EXTENSION bulkhead UPDATE TO '1.4'");
is($node->safe_psql('postgres',
		"SELECT extversion FROM pg_extension WHERE extname = 'bulkhead'"),
	'1.4', 'updated to 1.4');
$node->safe_psql('postgres', 'ALTER EXTENSION bulkhead UPDATE');
is($node->safe_psql('postgres',
		"SELECT extversion FROM pg_extension WHERE extname = 'bulkhead'"),
	$default_version, "updated to $default_version");
is($node->safe_psql('postgres', q{
		SELECT has_table_privilege('public', 'bulkhead_stats', 'SELECT'),
		       has_table_privilege('bh_reader', 'bulkhead_stats', 'SELECT'),
		       has_table_privilege('public', 'bulkhead_activity', 'SELECT'),
		       has_table_privilege('bh_reader', 'bulkhead_activity', 'SELECT'),
		       (SELECT count(*) FROM my_stats), (SELECT count(*) FROM my_activity)}),
	'f|t|f|t|2|0',
	"the update to $default_version keeps the privileges on the views and the views on them");
# 1.4's views (issue 42), as bulkhead_stats: any role reads them, only
# superusers reset the statements' figures
is($node->safe_psql('postgres', q{
		SELECT has_table_privilege('public', 'bulkhead_history', 'SELECT'),
		       has_table_privilege('public', 'bulkhead_statements', 'SELECT'),
		       has_function_privilege('public', 'bulkhead_statements_reset()', 'EXECUTE'),
		       (SELECT count(*) >= 0 FROM bulkhead_history),
		       (SELECT count(*) FROM bulkhead_statements)}),
	't|t|f|t|0', "the updates to $default_version add bulkhead_history and bulkhead_statements, readable by all");
# 1.5's columns (issue 48): a rule's importance (NULL for the rows of
# before, checked as in a fresh install), the views' priority columns
is($node->safe_psql('postgres', q{
		SELECT count(*) FILTER (WHERE importance IS NULL) || '/' || count(*)
		  FROM bulkhead_rule}),
	'1/1', "the update to $default_version gives the rules of before no importance");
my ($uret, $uout, $uerr) = $node->psql('postgres',
	"UPDATE bulkhead_rule SET importance = 'urgent'");
like($uerr, qr/invalid importance "urgent" for a rule/,
	"the updated rule table checks importance");
is($node->safe_psql('postgres', q{
		SELECT count(*) >= 0 FROM (SELECT importance, boosted, borrowed FROM bulkhead_activity) a,
		       (SELECT boosts, boosts_borrowed FROM bulkhead_stats) s,
		       (SELECT boosts, boosts_borrowed FROM bulkhead_history) h}),
	't', "the updated views have the priority columns");
$node->safe_psql('postgres', q{
	DROP VIEW my_stats, my_activity;
	GRANT SELECT ON bulkhead_stats, bulkhead_activity TO PUBLIC;
	REVOKE SELECT ON bulkhead_stats, bulkhead_activity FROM bh_reader;});
is($node->safe_psql('postgres', $rows_sql),
	$rows_before, "the workload rows survive the update to $default_version");

# A fresh install at the default version, in another database (changes to
# the workload table there are refused, but creating the extension is not)
$node->safe_psql('postgres', 'CREATE DATABASE fresh');
$node->safe_psql('fresh', 'CREATE EXTENSION bulkhead');

my $updated = $node->safe_psql('postgres', $objects_sql);
my $fresh = $node->safe_psql('fresh', $objects_sql);
cmp_ok(scalar(split /\n/, $fresh), '>', 40,
	'the catalog query lists the extension\'s objects');
# the lines that differ, rather than both listings whole
sub only_in
{
	my ($a, $b) = @_;
	my %in_b = map { $_ => 1 } split /\n/, $b;
	return grep { !$in_b{$_} } split /\n/, $a;
}
ok($updated eq $fresh,
	'an updated 1.0 has exactly the objects of a fresh install')
  or diag(join("\n",
		(map { "only in a fresh install: $_" } only_in($fresh, $updated)),
		(map { "only after the update:   $_" } only_in($updated, $fresh))));

# Each earlier release installed by its own script and updated from there:
# 1.1 as a fresh 1.1 install (not one that came from 1.0) updated to the
# default version has the objects of a fresh install too; so has 1.0 updated
# in one step through every script in between (ALTER EXTENSION finds the
# path).
foreach my $from ('1.4', '1.3', '1.2', '1.1', '1.0')
{
	my $db = 'from_' . ($from =~ s/\./_/r);
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, "CREATE EXTENSION bulkhead VERSION '$from'");
	is($node->safe_psql($db,
			"SELECT extversion FROM pg_extension WHERE extname = 'bulkhead'"),
		$from, "a fresh $from install");
	$node->safe_psql($db, 'ALTER EXTENSION bulkhead UPDATE');
	my $from_updated = $node->safe_psql($db, $objects_sql);
	ok($from_updated eq $fresh,
		"a fresh $from install updated to $default_version has exactly the objects of a fresh install")
	  or diag(join("\n",
			(map { "only in a fresh install: $_" } only_in($fresh, $from_updated)),
			(map { "only after the update:   $_" } only_in($from_updated, $fresh))));
}

# pg_dump keeps the configuration rows of the updated install, 1.3's
# columns with them, and they come back in a restore
my $out = `pg_dump --data-only -d "@{[$node->connstr('postgres')]}" 2>&1`;
like($out, qr/COPY public\.bulkhead_workload .*\nbatch\t1\t0/s,
	'pg_dump of the updated database keeps the workloads');
like($out, qr/\{work_mem=1MB\}/, 'pg_dump keeps the lane settings');
like($out, qr/COPY public\.bulkhead_rule .*\n1\t.*\tbatch\t1000000\t\{select\}/s,
	'pg_dump keeps the statement rules');
my $dump = PostgreSQL::Test::Utils::tempdir . '/upgraded.sql';
$node->command_ok(
	[ 'pg_dump', '-f', $dump, '-d', $node->connstr('postgres') ],
	'pg_dump of the updated database');
# (into the same database, bulkhead.database: elsewhere the rows are refused)
$node->safe_psql('postgres', 'DROP EXTENSION bulkhead');
$node->command_ok(
	[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-f', $dump, '-d', $node->connstr('postgres') ],
	'restore the dump');
is($node->safe_psql('postgres', q{
		SELECT w.name || ':' || coalesce(w.settings::text, '-') || ':' ||
		       coalesce((SELECT string_agg(r.min_cost || '/' || r.command::text, ',')
		                   FROM bulkhead_rule r WHERE r.workload = w.name), '-')
		  FROM bulkhead_workload w ORDER BY 1}),
	"batch:{work_mem=1MB}:1000000/{select}\nreports:-:-",
	'the restore has the settings and the statement rules');

$node->stop;
done_testing();
