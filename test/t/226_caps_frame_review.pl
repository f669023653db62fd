# 226_caps_frame_review.pl: defects found by the 1.4 review in the caps'
# statement frame (caps.c, commit 6217202): one GUC nesting level kept
# open across a client's statements.  Each subtest FAILS on the code it
# was written against (each passed at 6217202^, per-phase frames).
#
#  1. set_config_raise_leaves_cap_in_session: a statement raises a capped
#     setting with set_config(..., false) (or a function's plain SET); the
#     next statement of the transaction lowers it again with
#     GUC_ACTION_SAVE at the same nest level, whose stack entry is GUC_SET
#     by then (an Assert in push_old_value on a cassert build); the frame's
#     pop keeps the current value: after the commit the lane's cap IS the
#     session's own work_mem.  1.3 (and 6217202^) left the session's value.
#  2. deferred_trigger_set_clause_popped: at an implicit commit, a deferred
#     trigger's function runs at bulkhead_nesting 0 while the frame of the
#     client's statement is still open.  A utility in it (LOCK TABLE) is
#     taken for a top-level one and closes the frame with
#     AtEOXact_GUC(true, frame level), which pops the function's own SET
#     clause level too: a SECURITY DEFINER function's SET search_path is
#     undone in its middle, and the caller's search_path hijacks the
#     calls that follow (a plain role becomes superuser).
#  3. deferred_trigger_cursor_pops_set_clause: the same without a utility:
#     a FOR loop's query in that function runs in an SPI portal
#     (ActivePortal set, nesting 0), is taken for the client's statement,
#     and, shrunk by its memory grant (other caps than the frame's),
#     closes the frame.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use BulkheadTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = bulkhead_node('caps_frame_review', memory_request => 'limit');

$node->safe_psql('postgres', q{
	INSERT INTO bulkhead_workload (name, max_running, settings)
	VALUES ('capped', 20, ARRAY['work_mem=1MB']);
	INSERT INTO bulkhead_workload (name, max_running, settings, max_memory, memory_timeout)
	VALUES ('capped_mem', 20, ARRAY['work_mem=1MB'], '1MB', '0s');
	CREATE ROLE mallory LOGIN;
	ALTER ROLE mallory SET bulkhead.workload = 'capped';
	CREATE TABLE seen (at text, search_path text);
	GRANT INSERT ON seen TO PUBLIC;
});
wait_loaded($node, 'capped_mem', 20);

# --- 1. set_config in a capped statement, then the next statement ------------
{
	my $s = session($node, 'postgres', 'mallory');
	sql($s, "SET work_mem = '4MB'");
	is(sql($s, "BEGIN; SELECT current_setting('work_mem');"), '1MB',
		'set_config_raise_leaves_cap_in_session: the statement runs capped at 1MB');
	sql($s, "SELECT set_config('work_mem', '2GB', false)");
	is(sql($s, "SELECT current_setting('work_mem')"), '1MB',
		'set_config_raise_leaves_cap_in_session: the next statement is capped again');
	sql($s, 'COMMIT');
	is(sql($s, 'SHOW work_mem'), '2GB',
		'set_config_raise_leaves_cap_in_session: the session keeps its own value (not the cap)');
	close_session($s);
}

# --- 2. a deferred trigger's SECURITY DEFINER function at the commit ----------
{
	$node->safe_psql('postgres', q{
		CREATE SCHEMA audit;
		CREATE TABLE audit.log (who text);
		CREATE TABLE public.orders (id int);
		GRANT INSERT ON public.orders TO mallory;
		CREATE FUNCTION audit.note() RETURNS trigger LANGUAGE plpgsql
		SECURITY DEFINER SET search_path = audit, pg_catalog AS $$
		BEGIN
		    INSERT INTO public.seen VALUES ('before lock', current_setting('search_path'));
		    LOCK TABLE audit.log IN ROW EXCLUSIVE MODE;
		    INSERT INTO public.seen VALUES ('after lock', current_setting('search_path'));
		    INSERT INTO audit.log VALUES (lower(session_user));
		    RETURN NULL;
		END $$;
		CREATE CONSTRAINT TRIGGER orders_audit AFTER INSERT ON public.orders
		    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION audit.note();
		-- mallory's own schema, first in her search_path
		CREATE SCHEMA evil AUTHORIZATION mallory;
	});
	my $s = session($node, 'postgres', 'mallory');
	sql($s, q{
		CREATE FUNCTION evil.lower(text) RETURNS text LANGUAGE plpgsql AS $$
		BEGIN
		    EXECUTE 'ALTER ROLE mallory SUPERUSER';
		    RETURN $1;
		END $$;});
	# the cap lowers her work_mem: the frame of her statements is open
	sql($s, "SET work_mem = '4MB'; SET search_path = evil, pg_catalog, public;");
	my ($out, $err) = sql2($s, 'INSERT INTO public.orders VALUES (1)');
	is($node->safe_psql('postgres', q{SELECT string_agg(at || ': ' || search_path, '; ') FROM seen}),
		'before lock: audit, pg_catalog; after lock: audit, pg_catalog',
		'deferred_trigger_set_clause_popped: the function\'s SET search_path holds after LOCK TABLE');
	is($node->safe_psql('postgres', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'}),
		'f',
		'deferred_trigger_set_clause_popped: the caller\'s search_path does not reach the definer\'s calls');
	close_session($s);
	$node->safe_psql('postgres', 'ALTER ROLE mallory NOSUPERUSER; TRUNCATE seen;');
}

# --- 3. the same through a FOR loop whose query is shrunk --------------------
{
	$node->safe_psql('postgres', q{
		CREATE FUNCTION audit.loop() RETURNS trigger LANGUAGE plpgsql
		SECURITY DEFINER SET search_path = audit, pg_catalog AS $$
		DECLARE r record;
		BEGIN
		    INSERT INTO public.seen VALUES ('before loop', current_setting('search_path'));
		    FOR r IN SELECT g FROM generate_series(1, 10) g ORDER BY g DESC LOOP END LOOP;
		    INSERT INTO public.seen VALUES ('after loop', current_setting('search_path'));
		    RETURN NULL;
		END $$;
		CREATE TABLE public.orders2 (id int);
		GRANT INSERT ON public.orders2 TO mallory;
		CREATE CONSTRAINT TRIGGER orders2_audit AFTER INSERT ON public.orders2
		    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION audit.loop();
		ALTER ROLE mallory SET bulkhead.workload = 'capped_mem';
	});
	my $s = session($node, 'postgres', 'mallory');
	# capped_mem: work_mem capped at 1MB, max_memory 1MB, no wait: the
	# loop's query (2 MB at 1MB) is cut, shrunk to 512kB
	is(sql($s, 'SELECT workload FROM bulkhead_classify()'), 'capped_mem',
		'deferred_trigger_cursor_pops_set_clause: mallory runs in capped_mem');
	sql($s, "SET work_mem = '4MB'; SET search_path = public;");
	sql2($s, 'INSERT INTO public.orders2 VALUES (1)');
	is($node->safe_psql('postgres', q{SELECT string_agg(at || ': ' || search_path, '; ') FROM seen}),
		'before loop: audit, pg_catalog; after loop: audit, pg_catalog',
		'deferred_trigger_cursor_pops_set_clause: the function\'s SET search_path holds after its FOR loop');
	close_session($s);
}

done_testing();
