# 570_statements_privileges.pl: bulkhead_statements (1.5) follows
# pg_stat_statements' privilege model.  Each entry is kept per role and
# database that ran the statement (userid, dbid, appended); a reader sees
# the queryid and the memory figures (max_memory_requested, shrunk) of the
# rows of roles whose privileges it has, all of them with pg_read_all_stats
# or as a superuser, and NULL there for the others' rows: a request of a
# statement over a table the reader may not read tells the planner's
# estimates that pg_stats hides.  Issue 47, item 0.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = bulkhead_node('stmtpriv',
	conf => "compute_query_id = on\n"
	  . "bulkhead.track_statements = on\n");
$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, max_queued, queue_timeout, max_memory)
	VALUES ('w', 10, 0, '0', '256MB');
	CREATE ROLE alice LOGIN;
	CREATE ROLE bob LOGIN;
	CREATE ROLE carol LOGIN IN ROLE alice;        -- inherits alice's privileges
	CREATE ROLE dave LOGIN NOINHERIT IN ROLE alice; -- a member without them
	CREATE ROLE stats LOGIN IN ROLE pg_read_all_stats;
	ALTER ROLE alice SET bulkhead.workload = 'w';
	ALTER ROLE bob SET bulkhead.workload = 'w';
	CREATE TABLE secret (id int, v int);
	INSERT INTO secret SELECT g, g FROM generate_series(1, 1000) g;
	ANALYZE secret;
	ALTER TABLE secret OWNER TO alice;
	CREATE TABLE open (id int);
	GRANT SELECT ON open TO alice, bob;
});
wait_loaded($node, 'w', 10);

sub as
{
	my ($role, $sql) = @_;
	return $node->safe_psql('postgres', $sql, extra_params => [ '-U', $role ]);
}

# alice sorts her table (a request), bob reads another (no memory node);
# each three times
for (1 .. 3)
{
	as('alice', 'SELECT * FROM secret ORDER BY v LIMIT 1');
	as('bob', 'SELECT * FROM open WHERE id = 1');
}
my ($alice, $bob, $db) = split /\|/, $node->safe_psql('postgres',
	"SELECT 'alice'::regrole::oid, 'bob'::regrole::oid, oid FROM pg_database WHERE datname = 'postgres'");

# each role's rows as a reader sees them: queryid and memory shown or NULL
my $rows = q{
	SELECT r.rolname || ' ' || (s.dbid = (SELECT oid FROM pg_database WHERE datname = 'postgres'))
	       || ' calls ' || s.calls
	       || ' queryid ' || CASE WHEN s.queryid IS NULL THEN 'null' ELSE 'shown' END
	       || ' memory ' || coalesce(s.max_memory_requested::text, 'null')
	       || ' shrunk ' || coalesce(s.shrunk::text, 'null')
	  FROM bulkhead_statements s JOIN pg_roles r ON r.oid = s.userid
	 WHERE s.workload = 'w' AND s.calls = 3
	 ORDER BY 1};
my $request = $node->safe_psql('postgres',
	"SELECT max_memory_requested FROM bulkhead_statements WHERE userid = $alice AND calls = 3");
cmp_ok($request, '>', 0, "alice's sort requested memory ($request bytes)");

my $all = "alice true calls 3 queryid shown memory $request shrunk 0\n"
  . "bob true calls 3 queryid shown memory 0 shrunk 0";
my $bob_sees = "alice true calls 3 queryid null memory null shrunk null\n"
  . "bob true calls 3 queryid shown memory 0 shrunk 0";
my $alice_sees = "alice true calls 3 queryid shown memory $request shrunk 0\n"
  . "bob true calls 3 queryid null memory null shrunk null";
is($node->safe_psql('postgres', $rows), $all, 'a superuser sees every row');
is(as('stats', $rows), $all, 'a member of pg_read_all_stats sees every row');
is(as('bob', $rows), $bob_sees, "bob sees his own rows, not alice's queryid nor her request");
is(as('alice', $rows), $alice_sees, "alice sees hers, not bob's");
is(as('carol', $rows), $alice_sees, "a member that inherits alice's privileges sees her rows");
is(as('dave', $rows),
	"alice true calls 3 queryid null memory null shrunk null\n"
	  . "bob true calls 3 queryid null memory null shrunk null",
	'a member without her privileges (NOINHERIT) does not');

# the key: the same statement run by two roles is two rows, each its own
as('alice', 'SELECT count(*) FROM open');
as('bob', 'SELECT count(*) FROM open') for 1 .. 2;
is($node->safe_psql('postgres', q{
	SELECT string_agg(r.rolname || ':' || s.calls, ' ' ORDER BY r.rolname)
	  FROM bulkhead_statements s JOIN pg_roles r ON r.oid = s.userid
	 WHERE s.queryid = (SELECT queryid FROM bulkhead_statements
	                     WHERE userid = 'bob'::regrole::oid AND calls = 2)}),
	'alice:1 bob:2', 'a statement run by two roles is counted per role');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM bulkhead_statements WHERE dbid <> $db OR userid NOT IN ($alice, $bob)"),
	'0', 'every row names the database and the role that ran it');

# the columns of 1.4 first, then the new ones appended
is($node->safe_psql('postgres', q{
	SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute
	 WHERE attrelid = 'bulkhead_statements'::regclass AND attnum > 0}),
	'queryid,workload,calls,waits,wait_time_total_ms,wait_time_max_ms,rejected,'
	  . 'timed_out,moved_in,max_memory_requested,shrunk,userid,dbid,'
	  . 'peak_used,spills,memory_request,memory_source',
	"the view keeps 1.4's columns and appends userid and dbid (then grant feedback's four)");
is(as('bob', "SELECT has_table_privilege('bulkhead_statements', 'SELECT')"),
	't', 'any role may still read the view');

done_testing();
