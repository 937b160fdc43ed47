  ;; -- nothing
