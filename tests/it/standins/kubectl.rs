//! kubectl 1.33 and 1.27 against the stand-ins (filled in below).
