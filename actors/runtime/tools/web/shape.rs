//! A first, bounded parse that decides whether a page may go to the readability extractor.
//!
//! html5ever's tree builder checks scopes by walking the stack of open elements, so its cost
//! grows with the square of the nesting depth, and dom_smoothie's scoring is worse (16,000
//! nested `<div>`s, 80 KB, cost 90 s of CPU; 64,000 several minutes). Misnested formatting
//! elements are worse still: `<div><b id=N></div>` repeated makes the parser re-create every
//! earlier `<b>` each time, so 2,000 repetitions (43 KB) build two million elements. A page from
//! the web can therefore pin a core for hours or exhaust memory.
//!
//! [`check`] parses the page with html5ever into a skeleton that keeps only the element tree,
//! feeding it in chunks and stopping as soon as the page has more than [`MAX_ELEMENTS`]
//! elements, nests deeper than [`MAX_DEPTH`], or has taken [`BUDGET`] (a safety net; the counts
//! stop every known shape long before). Real pages stay far below both limits.

use html5ever::tendril::{StrTendril, TendrilSink};
use html5ever::tree_builder::{ElementFlags, NodeOrText, QuirksMode, TreeSink};
use html5ever::{Attribute, QualName, local_name, ns, parse_document};
use std::borrow::Cow;
use std::cell::{Cell, Ref, RefCell};
use std::time::{Duration, Instant};

/// Elements a page may have.
pub(crate) const MAX_ELEMENTS: usize = 200_000;
/// Depth of the element tree a page may reach (Blink's parser stops nesting at 512 as well).
pub(crate) const MAX_DEPTH: usize = 512;
/// Parsing time after which a page is refused whatever its counts.
pub(crate) const BUDGET: Duration = Duration::from_secs(5);
/// Bytes handed to the parser between two checks.
const CHUNK: usize = 8 * 1024;

/// Why a page is not extracted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum TooComplex {
    /// More than [`MAX_ELEMENTS`] elements.
    #[error("it has more than {MAX_ELEMENTS} elements")]
    Elements,
    /// Deeper than [`MAX_DEPTH`].
    #[error("its elements are nested more than {MAX_DEPTH} deep")]
    Depth,
    /// Parsing ran past [`BUDGET`].
    #[error("parsing it took longer than {} s", BUDGET.as_secs())]
    Slow,
}

/// Whether `html` is small and shallow enough to extract. Linear in the page for real pages,
/// bounded by [`BUDGET`] for any page.
pub(crate) fn check(html: &str) -> Result<(), TooComplex> {
    check_within(html, BUDGET)
}

/// [`check`] with another time budget: the tests judge the counts alone (`Duration::MAX`), so a
/// loaded machine cannot turn a count verdict into [`TooComplex::Slow`].
pub(crate) fn check_within(html: &str, budget: Duration) -> Result<(), TooComplex> {
    #[allow(
        clippy::disallowed_methods,
        reason = "the HTML shaping budget bounds real CPU time spent parsing"
    )]
    let started = Instant::now();
    let mut parser = parse_document(Skeleton::default(), Default::default());
    let mut rest = html;
    while !rest.is_empty() {
        let mut end = rest.len().min(CHUNK);
        while !rest.is_char_boundary(end) {
            end += 1;
        }
        let (chunk, tail) = rest.split_at(end);
        parser.process(StrTendril::from_slice(chunk));
        rest = tail;
        parser.tokenizer.sink.sink.verdict()?;
        if started.elapsed() > budget {
            return Err(TooComplex::Slow);
        }
    }
    let skeleton = parser.finish();
    skeleton.verdict()?;
    if skeleton.depth() > MAX_DEPTH {
        return Err(TooComplex::Depth);
    }
    Ok(())
}

/// One node of the skeleton: elements, the document, comments and template contents (text and
/// doctypes are dropped: they never nest). Nodes that are not elements carry a placeholder name.
struct Node {
    name: QualName,
    parent: Option<usize>,
    children: Vec<usize>,
}

/// A [`TreeSink`] that keeps the element tree and counts it. Handles are indexes; node 0 is the
/// document.
struct Skeleton {
    nodes: RefCell<Vec<Node>>,
    /// Elements created.
    elements: Cell<usize>,
    /// The deepest element seen when appended (exact after [`Skeleton::depth`]).
    deepest: Cell<usize>,
    /// Depth by node at the time it was appended.
    depths: RefCell<Vec<usize>>,
    /// Each template's contents, a child node of the template so its depth counts.
    templates: RefCell<std::collections::HashMap<usize, usize>>,
}

impl Default for Skeleton {
    fn default() -> Self {
        Self {
            nodes: RefCell::new(vec![Node {
                name: placeholder(),
                parent: None,
                children: Vec::new(),
            }]),
            elements: Cell::new(0),
            deepest: Cell::new(0),
            depths: RefCell::new(vec![0]),
            templates: RefCell::default(),
        }
    }
}

impl Skeleton {
    fn verdict(&self) -> Result<(), TooComplex> {
        if self.elements.get() > MAX_ELEMENTS {
            Err(TooComplex::Elements)
        } else if self.deepest.get() > MAX_DEPTH {
            Err(TooComplex::Depth)
        } else {
            Ok(())
        }
    }

    fn add(&self, name: QualName) -> usize {
        let mut nodes = self.nodes.borrow_mut();
        nodes.push(Node {
            name,
            parent: None,
            children: Vec::new(),
        });
        self.depths.borrow_mut().push(0);
        nodes.len() - 1
    }

    fn attach(&self, parent: usize, child: usize) {
        self.detach(child);
        let mut nodes = self.nodes.borrow_mut();
        if let Some(n) = nodes.get_mut(child) {
            n.parent = Some(parent);
        }
        if let Some(p) = nodes.get_mut(parent) {
            p.children.push(child);
        }
        let mut depths = self.depths.borrow_mut();
        let depth = depths.get(parent).map_or(0, |d| d + 1);
        if let Some(d) = depths.get_mut(child) {
            *d = depth;
        }
        self.deepest.set(self.deepest.get().max(depth));
    }

    fn detach(&self, child: usize) {
        let mut nodes = self.nodes.borrow_mut();
        let Some(parent) = nodes.get_mut(child).and_then(|n| n.parent.take()) else {
            return;
        };
        if let Some(p) = nodes.get_mut(parent) {
            p.children.retain(|&c| c != child);
        }
    }

    fn parent_of(&self, node: usize) -> Option<usize> {
        self.nodes.borrow().get(node).and_then(|n| n.parent)
    }

    /// The exact depth of the finished tree, walked without recursion (a tree with more visits
    /// than nodes, which cannot happen, counts as too deep).
    fn depth(&self) -> usize {
        let nodes = self.nodes.borrow();
        let mut deepest = 0;
        let mut visits = 0;
        let mut stack = vec![(0usize, 0usize)];
        while let Some((node, depth)) = stack.pop() {
            visits += 1;
            if visits > nodes.len() {
                return usize::MAX;
            }
            deepest = deepest.max(depth);
            if let Some(n) = nodes.get(node) {
                stack.extend(n.children.iter().map(|&c| (c, depth + 1)));
            }
        }
        deepest
    }
}

/// The name of nodes that are not elements (never asked for by the parser).
fn placeholder() -> QualName {
    QualName::new(None, ns!(), local_name!(""))
}

impl TreeSink for Skeleton {
    type Handle = usize;
    type Output = Self;
    type ElemName<'a> = Ref<'a, QualName>;

    fn finish(self) -> Self {
        self
    }

    fn parse_error(&self, _msg: Cow<'static, str>) {}

    fn get_document(&self) -> usize {
        0
    }

    fn elem_name<'a>(&'a self, target: &'a usize) -> Ref<'a, QualName> {
        // Node 0 (the document) always exists.
        Ref::map(self.nodes.borrow(), |nodes| {
            &nodes.get(*target).unwrap_or(&nodes[0]).name
        })
    }

    fn create_element(&self, name: QualName, _: Vec<Attribute>, _: ElementFlags) -> usize {
        self.elements.set(self.elements.get() + 1);
        self.add(name)
    }

    fn create_comment(&self, _text: StrTendril) -> usize {
        self.add(placeholder())
    }

    fn create_pi(&self, _target: StrTendril, _data: StrTendril) -> usize {
        self.add(placeholder())
    }

    fn append(&self, parent: &usize, child: NodeOrText<usize>) {
        if let NodeOrText::AppendNode(child) = child {
            self.attach(*parent, child);
        }
    }

    fn append_based_on_parent_node(
        &self,
        element: &usize,
        prev_element: &usize,
        child: NodeOrText<usize>,
    ) {
        let parent = self.parent_of(*element).unwrap_or(*prev_element);
        self.append(&parent, child);
    }

    fn append_doctype_to_document(&self, _: StrTendril, _: StrTendril, _: StrTendril) {}

    fn get_template_contents(&self, target: &usize) -> usize {
        if let Some(&fragment) = self.templates.borrow().get(target) {
            return fragment;
        }
        let fragment = self.add(placeholder());
        self.attach(*target, fragment);
        self.templates.borrow_mut().insert(*target, fragment);
        fragment
    }

    fn same_node(&self, x: &usize, y: &usize) -> bool {
        x == y
    }

    fn set_quirks_mode(&self, _mode: QuirksMode) {}

    fn append_before_sibling(&self, sibling: &usize, new_node: NodeOrText<usize>) {
        if let (Some(parent), NodeOrText::AppendNode(_)) = (self.parent_of(*sibling), &new_node) {
            self.append(&parent, new_node);
        }
    }

    fn add_attrs_if_missing(&self, _target: &usize, _attrs: Vec<Attribute>) {}

    fn remove_from_parent(&self, target: &usize) {
        self.detach(*target);
    }

    fn reparent_children(&self, node: &usize, new_parent: &usize) {
        let children = match self.nodes.borrow_mut().get_mut(*node) {
            Some(n) => std::mem::take(&mut n.children),
            None => return,
        };
        for child in children {
            if let Some(n) = self.nodes.borrow_mut().get_mut(child) {
                n.parent = None;
            }
            self.attach(*new_parent, child);
        }
    }
}
