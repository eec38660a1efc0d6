-- name: login_role
-- Who the connection logged in as (the session user) and works as (the current user), whether
-- row-level security holds either, and whether the login may become the application role (a
-- superuser always may). Nothing when the role does not exist yet.
select session_user as login,
       l.rolsuper or l.rolbypassrls as login_bypasses_rls,
       w.rolsuper or w.rolbypassrls as bypasses_rls,
       current_user = %(role)s as is_app_role,
       pg_has_role(session_user, a.oid, 'MEMBER') as can_become
  from pg_roles l, pg_roles w, pg_roles a
 where l.rolname = session_user and w.rolname = current_user and a.rolname = %(role)s;
