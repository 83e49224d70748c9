#!/bin/bash
# A stand-in for kernelevo-runner in CPU tests (KERNELEVO_RUNNER=this file): --info describes a GPU,
# --serve answers the N-th job with line N of $KERNELEVO_FAKE_REPLIES (JobResult JSON) and appends
# "job N locked" or "job N unlocked" to $KERNELEVO_FAKE_LOG: whether the device's GPU lock
# ($KERNELEVO_LOCK_DIR/gpu-GPU-fake.lock) was held while the job ran.
case "$1" in
--info)
    echo '{"present":true,"index":0,"name":"Fake GPU","cc_major":9,"cc_minor":0,"sm_count":132,"uuid":"GPU-fake","mem_bandwidth_gbs":4800}'
    ;;
--serve)
    while IFS= read -r line; do
        n=$(( $( (cat "$KERNELEVO_FAKE_LOG" 2>/dev/null || true) | wc -l) + 1 ))
        if flock -n "$KERNELEVO_LOCK_DIR/gpu-GPU-fake.lock" true; then held=unlocked; else held=locked; fi
        echo "job $n $held" >> "$KERNELEVO_FAKE_LOG"
        reply=$(sed -n "${n}p" "$KERNELEVO_FAKE_REPLIES")
        [ -n "$reply" ] || reply='{"status":"runtime_error","log":"fake runner: no reply scripted"}'
        echo "$reply"
    done
    ;;
*) exit 2 ;;
esac
