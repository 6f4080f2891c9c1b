;; EP's embedded planner booster: rejects tool calls whose arguments are empty, except for
;; read tools, which take no payload by design.
;;
;; Read tools are recognised by name: the tower's catalog names every read tool list_* or get_*
;; (tower/domain/tools/catalog.test.ts keeps it so), and their arguments are optional filters
;; (list_domains, list_nodes, list_pending_actions take none at all). Every other tool carries a
;; payload, so an empty one is a mistake worth stopping before it reaches the tower.
;;
;; ABI (docs/booster.md): the host calls alloc(len), copies the UTF-8 JSON
;; {"tool":...,"arguments":...} to the returned pointer, then calls validate(ptr, len).
;; The host serializes with "tool" first, "arguments" last and no whitespace, so the
;; arguments value is whatever sits between the last `"arguments":` and the final `}`.
;; An empty payload ({}, [], null or "") is then recognised from the suffix alone:
;; a non-empty JSON object or array never has `{` or `[` right before its closing
;; bracket, and a nested null or "" is followed by at least one more `}`.
(module
  (memory (export "memory") 1)

  ;; Reason returned for a rejection (reason_ptr / reason_len).
  (data (i32.const 16) "payload is empty: the tool arguments must have at least one field")
  ;; Suffixes that mark an empty arguments value.
  (data (i32.const 128) "{}}")
  (data (i32.const 136) "[]}")
  (data (i32.const 144) ":null}")
  (data (i32.const 152) ":\"\"}")
  ;; Prefixes of the input that name a read tool (the host writes "tool" first).
  (data (i32.const 160) "{\"tool\":\"list_")
  (data (i32.const 176) "{\"tool\":\"get_")

  ;; Input always lands at 1024; memory grows to fit it.
  (global $input_base i32 (i32.const 1024))

  (func (export "alloc") (param $len i32) (result i32)
    (local $pages_needed i32)
    (local.set $pages_needed
      (i32.sub
        (i32.shr_u
          (i32.add (i32.add (global.get $input_base) (local.get $len)) (i32.const 65535))
          (i32.const 16))
        (memory.size)))
    (if (i32.gt_s (local.get $pages_needed) (i32.const 0))
      (then
        (if (i32.eq (memory.grow (local.get $pages_needed)) (i32.const -1))
          (then (return (i32.const 0))))))
    (global.get $input_base))

  ;; 1 when the n bytes at a equal the n bytes at b.
  (func $equal (param $a i32) (param $b i32) (param $n i32) (result i32)
    (local $i i32)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (if (i32.ne
              (i32.load8_u (i32.add (local.get $a) (local.get $i)))
              (i32.load8_u (i32.add (local.get $b) (local.get $i))))
          (then (return (i32.const 0))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (i32.const 1))

  ;; 1 when the len bytes at ptr end with the slen bytes at sptr.
  (func $ends_with (param $ptr i32) (param $len i32) (param $sptr i32) (param $slen i32) (result i32)
    (if (i32.lt_u (local.get $len) (local.get $slen))
      (then (return (i32.const 0))))
    (call $equal
      (i32.sub (i32.add (local.get $ptr) (local.get $len)) (local.get $slen))
      (local.get $sptr)
      (local.get $slen)))

  ;; 1 when the len bytes at ptr start with the slen bytes at sptr.
  (func $starts_with (param $ptr i32) (param $len i32) (param $sptr i32) (param $slen i32) (result i32)
    (if (i32.lt_u (local.get $len) (local.get $slen))
      (then (return (i32.const 0))))
    (call $equal (local.get $ptr) (local.get $sptr) (local.get $slen)))

  ;; Verdict: 0 allow, 1 reject.
  (func (export "validate") (param $ptr i32) (param $len i32) (result i32)
    ;; read tools: any arguments, including none
    (if (i32.or
          (call $starts_with (local.get $ptr) (local.get $len) (i32.const 160) (i32.const 14))
          (call $starts_with (local.get $ptr) (local.get $len) (i32.const 176) (i32.const 13)))
      (then (return (i32.const 0))))
    (if (i32.or
          (i32.or
            (call $ends_with (local.get $ptr) (local.get $len) (i32.const 128) (i32.const 3))
            (call $ends_with (local.get $ptr) (local.get $len) (i32.const 136) (i32.const 3)))
          (i32.or
            (call $ends_with (local.get $ptr) (local.get $len) (i32.const 144) (i32.const 6))
            (call $ends_with (local.get $ptr) (local.get $len) (i32.const 152) (i32.const 4))))
      (then (return (i32.const 1))))
    (i32.const 0))

  (func (export "reason_ptr") (result i32) (i32.const 16))
  (func (export "reason_len") (result i32) (i32.const 65)))
