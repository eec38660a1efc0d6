-- fairqueue.admission_checks clamps the transaction itself and says what it is clamped to, so
-- that an admission with no upstream service is one statement (fairqueue.admission): its
-- earlier form, which answered fewer columns, is dropped here and defined again with the rest
-- of sql/functions/admission.sql after the migrations.
drop function if exists fairqueue.admission_checks(text, text, integer, text, integer, text, bigint, uuid, text);
