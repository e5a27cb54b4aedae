//! Export and bundle formats (filled in below).
